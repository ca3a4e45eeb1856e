//! The van's sender thread: it owns every DEALER, connects them as asked (never two
//! nodes of the same role, as ps-lite) and sends in the order given.

use super::{MonitorNote, Outgoing, Shared, CLOSE_LINGER_MS};
use crate::error::Error;
use crate::kvstore::dist::layout::rank_of;
use crate::kvstore::dist::meta::{Node, Role, EMPTY, WIRE_VERSION};
use crate::kvstore::dist::transport::{endpoint, Dealer, DealerOptions};
use std::collections::HashMap;
use std::sync::mpsc;

/// The sender thread: connects and sends in the order asked, owning every DEALER.
pub(super) fn send_loop(
    shared: &Shared,
    ctx: &zmq::Context,
    outgoing: mpsc::Receiver<Outgoing>,
    notes: mpsc::Sender<MonitorNote>,
) {
    let mut dealers: HashMap<i32, Dealer> = HashMap::new();
    let mut generation = 0u64;
    for out in outgoing {
        match out {
            Outgoing::Connect(node) => {
                let me = shared.me.lock().clone();
                // ps-lite never connects two nodes of the same role.
                if node.role == me.role && node.id != me.id {
                    continue;
                }
                if let Some(old) = dealers.remove(&node.id) {
                    let _ = notes.send(MonitorNote::Retire(node.id));
                    drop(old);
                }
                let opts = DealerOptions {
                    identity: (me.id != EMPTY).then_some(me.id),
                    heartbeat_ms: shared.config.heartbeat_ms,
                    send_hwm: shared.config.send_hwm,
                };
                generation += 1;
                let name = format!("rsmx-van-mon-{:p}-{generation}", shared);
                let to = endpoint(&node.hostname, node.port as u16);
                match Dealer::connect_monitored(ctx, &to, opts, &name) {
                    Ok((dealer, monitor)) => {
                        dealers.insert(node.id, dealer);
                        let _ = notes.send(MonitorNote::Watch(node.id, describe(&node), monitor));
                    }
                    Err(e) => shared.fail(format!("KVStore dist: {}: {e}", describe(&node))),
                }
            }
            Outgoing::Send {
                recver,
                mut meta,
                data,
            } => {
                meta.rsmx_wire = Some(WIRE_VERSION);
                if shared.config.verbose >= 2 {
                    let sizes: Vec<usize> = data.iter().map(Vec::len).collect();
                    shared.log(2, &meta.debug_string(EMPTY, recver, &sizes));
                }
                let sent = match dealers.get(&recver) {
                    Some(d) => d.send(meta.encode(), data),
                    None => Err(Error::Runtime(format!(
                        "KVStore dist: no connection to node {recver}"
                    ))),
                };
                if let Err(e) = sent {
                    shared.fail(e.to_string());
                }
            }
            Outgoing::Stop => break,
        }
    }
    for (peer, dealer) in dealers {
        let _ = notes.send(MonitorNote::Retire(peer));
        dealer.close(CLOSE_LINGER_MS);
    }
}

/// How errors name a peer: `server rank 0 (node 8, 127.0.0.1:41234)`, `the scheduler at
/// host:port`.
pub(super) fn describe(node: &Node) -> String {
    match node.role {
        Role::Scheduler => format!("the scheduler at {}:{}", node.hostname, node.port),
        role => format!(
            "{} rank {} (node {}, {}:{})",
            role.name(),
            rank_of(node.id),
            node.id,
            node.hostname,
            node.port
        ),
    }
}

//! Clusters of nodes in one process, each with its own sockets and threads, over
//! loopback TCP.

use super::*;
use crate::kvstore::dist::layout::{server_id, worker_id, SERVER_GROUP, WORKER_GROUP};
use std::thread;
use std::time::Duration;

/// A port for a test's scheduler: free now, below the range the system hands out for
/// wildcard binds (so no node of another test takes it), and a different one each call.
pub(crate) fn scheduler_port() -> u16 {
    use std::sync::atomic::AtomicU32;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = 20_000 + (std::process::id() * 97) % 10_000;
    loop {
        let port = (base + NEXT.fetch_add(1, Ordering::Relaxed) % 2_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub(crate) fn config(role: Role, port: u16, servers: i32, workers: i32) -> NodeConfig {
    NodeConfig {
        role,
        num_servers: servers,
        num_workers: workers,
        scheduler_host: "127.0.0.1".into(),
        scheduler_port: port,
        node_host: "127.0.0.1".into(),
        port: None,
        send_hwm: None,
        // PS_VERBOSE's log for a test being debugged.
        verbose: std::env::var("RSMX_TEST_PS_VERBOSE").map_or(0, |v| v.parse().unwrap_or(0)),
        resend: false,
        heartbeat_ms: 200,
        connect_timeout: Duration::from_secs(20),
        bigarray_bound: 1_000_000,
        port_file: None,
        ipc: cfg!(target_os = "linux"),
    }
}

/// Starts a scheduler and the other nodes, each joining on its own thread; returns them
/// all, scheduler first.
fn cluster(servers: i32, workers: i32) -> Vec<Van> {
    let port = scheduler_port();
    let mut roles = vec![Role::Scheduler];
    roles.extend(std::iter::repeat_n(Role::Server, servers as usize));
    roles.extend(std::iter::repeat_n(Role::Worker, workers as usize));
    let joins: Vec<_> = roles
        .into_iter()
        .map(|role| {
            let c = config(role, port, servers, workers);
            thread::spawn(move || Van::join(c))
        })
        .collect();
    joins
        .into_iter()
        .map(|j| j.join().unwrap().unwrap())
        .collect()
}

#[test]
fn nodes_register_take_ps_lite_ids_and_pass_barriers() {
    let vans = cluster(2, 2);
    let nodes = vans[0].nodes();
    assert_eq!(nodes.len(), 5);
    assert_eq!(nodes.last().unwrap().id, SCHEDULER);
    // On one host, ranks follow the ports in ascending order within each role.
    for (role, id_of) in [
        (Role::Server, server_id as fn(i32) -> i32),
        (Role::Worker, worker_id),
    ] {
        let mut mine: Vec<Node> = vans[1..]
            .iter()
            .map(Van::my_node)
            .filter(|n| n.role == role)
            .collect();
        mine.sort_by_key(|n| n.port);
        let ids: Vec<i32> = mine.iter().map(|n| n.id).collect();
        assert_eq!(ids, [id_of(0), id_of(1)], "{role:?}");
    }
    for v in &vans[1..] {
        assert_eq!(v.nodes(), nodes, "every node has the scheduler's list");
        assert_eq!(v.rank(), rank_of(v.my_node().id));
    }
    // A barrier of the workers and the scheduler; the servers are not in it.
    let in_group: Vec<&Van> = vans
        .iter()
        .filter(|v| v.config().role != Role::Server)
        .collect();
    thread::scope(|s| {
        let waits: Vec<_> = in_group
            .iter()
            .map(|v| s.spawn(|| v.barrier(WORKER_GROUP | SCHEDULER)))
            .collect();
        for w in waits {
            w.join().unwrap().unwrap();
        }
    });
    let server = vans
        .iter()
        .find(|v| v.config().role == Role::Server)
        .unwrap();
    let e = server.barrier(WORKER_GROUP).unwrap_err().to_string();
    assert!(
        e.contains("cannot take part in a barrier of group 4"),
        "{e}"
    );
    thread::scope(|s| {
        let ends: Vec<_> = vans.iter().map(|v| s.spawn(|| v.finalize())).collect();
        for e in ends {
            e.join().unwrap().unwrap();
        }
    });
    for v in &vans {
        assert_eq!(v.failure(), None, "a finished cluster reports no lost peer");
    }
}

#[test]
fn a_group_of_one_needs_no_scheduler_round() {
    let vans = cluster(1, 1);
    let server = vans
        .iter()
        .find(|v| v.config().role == Role::Server)
        .unwrap();
    server.barrier(SERVER_GROUP).unwrap();
    thread::scope(|s| {
        for v in &vans {
            s.spawn(|| v.finalize().unwrap());
        }
    });
}

#[test]
fn a_node_without_a_scheduler_gives_up_naming_its_address() {
    // Port 1: no scheduler listens there.
    let port = 1;
    let mut c = config(Role::Worker, port, 1, 1);
    c.connect_timeout = Duration::from_secs(1);
    let e = Van::start(c).err().expect("no scheduler").to_string();
    assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(e.contains("within 1 s"), "{e}");
    assert!(e.contains("this worker was not registered"), "{e}");
    assert!(e.contains("DMLC_PS_ROOT_PORT"), "{e}");
}

#[test]
fn a_scheduler_port_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let e = Van::start(config(Role::Scheduler, port, 1, 1))
        .err()
        .expect("the port is taken")
        .to_string();
    assert!(
        e.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{e}"
    );
}

#[test]
fn a_lost_worker_fails_the_barriers_of_the_nodes_connected_to_it() {
    let mut vans = cluster(1, 2);
    let lost = vans.pop().unwrap();
    let what = format!("worker rank {} (node {}", lost.rank(), lost.my_node().id);
    drop(lost);
    // The scheduler and the server each hold a connection to the worker; the other
    // worker holds none and hears it from the scheduler.
    thread::scope(|s| {
        for v in &vans {
            s.spawn(|| {
                let e = v.barrier(ALL).unwrap_err().to_string();
                assert!(e.contains(&what) && e.contains("unreachable"), "{e}");
                assert!(v.failure().is_some());
            });
        }
    });
    let other = vans
        .iter()
        .find(|v| v.config().role == Role::Worker)
        .unwrap();
    let e = other.failure().unwrap();
    assert!(e.ends_with("(reported by the scheduler)"), "{e}");
}

#[test]
fn with_ps_resend_every_message_is_acknowledged_and_the_cluster_runs_as_before() {
    let port = scheduler_port();
    let joins: Vec<_> = [Role::Scheduler, Role::Server, Role::Worker, Role::Worker]
        .into_iter()
        .map(|role| {
            let mut c = config(role, port, 1, 2);
            c.resend = true;
            thread::spawn(move || Van::join(c))
        })
        .collect();
    let vans: Vec<Van> = joins
        .into_iter()
        .map(|j| j.join().unwrap().unwrap())
        .collect();
    thread::scope(|s| {
        for v in &vans {
            s.spawn(|| {
                v.barrier(ALL).unwrap();
                v.finalize().unwrap();
            });
        }
    });
    for v in &vans {
        assert_eq!(v.failure(), None);
    }
}

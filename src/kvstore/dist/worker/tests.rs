//! Whole clusters in one process: a scheduler, servers and workers over loopback, as
//! MXNet's `dist_sync` drives them.

use super::*;
use crate::kvstore::dist::flat::Flat;
use crate::kvstore::dist::layout::{ServerCommand, WORKER_GROUP};
use crate::kvstore::dist::server::{Controller, DistServer};
use crate::kvstore::dist::store::Updater;
use crate::kvstore::dist::van::tests::{config, scheduler_port};
use crate::testutil::{f32_bytes as f32s, f32_values as floats};
use std::sync::mpsc;
use std::thread;

/// Waits for a callback's result.
pub(crate) fn wait<T: Send + 'static>(
    start: impl FnOnce(Box<dyn FnOnce(Result<T>) + Send>),
) -> Result<T> {
    let (tx, rx) = mpsc::channel();
    start(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("an answer within 20 s")
}

/// `w -= lr * g`, from a body holding the learning rate as text.
struct Sgd(f32);

impl Updater for Sgd {
    fn update(&mut self, _key: u64, merged: &Flat, stored: &mut Flat) -> Result<()> {
        let w: Vec<f32> = floats(&stored.bytes)
            .iter()
            .zip(floats(&merged.bytes))
            .map(|(w, g)| w - self.0 * g)
            .collect();
        stored.bytes = f32s(&w).into();
        Ok(())
    }
}

/// An updater that always fails, as an optimizer raising on the server.
struct Failing;

impl Updater for Failing {
    fn update(&mut self, key: u64, _merged: &Flat, _stored: &mut Flat) -> Result<()> {
        Err(Error::Value(format!("the update of key {key} failed")))
    }
}

/// Makes `Sgd` from a learning rate in text, or `Failing` from `fail`.
pub(crate) struct TextController;

impl Controller for TextController {
    fn updater(&mut self, body: &[u8]) -> Result<Box<dyn Updater>> {
        if body == b"fail" {
            return Ok(Box::new(Failing));
        }
        let lr: f32 = String::from_utf8_lossy(body)
            .parse()
            .map_err(|_| Error::Value("not a learning rate".into()))?;
        Ok(Box::new(Sgd(lr)))
    }
}

/// Runs `work` on each of `workers` workers of a cluster with `servers` servers (the
/// scheduler and servers on their own threads), then stops the servers and ends.
pub(crate) fn with_cluster(
    servers: i32,
    workers: i32,
    bound: usize,
    work: impl Fn(&Arc<DistWorker>) + Sync,
) {
    let port = scheduler_port();
    let cfg = |role| {
        let mut c = config(role, port, servers, workers);
        c.bigarray_bound = bound;
        c
    };
    let scheduler = {
        let c = cfg(Role::Scheduler);
        thread::spawn(move || Van::join(c).and_then(|v| v.finalize()))
    };
    let server_threads: Vec<_> = (0..servers)
        .map(|_| {
            let c = cfg(Role::Server);
            thread::spawn(move || DistServer::join(c).and_then(|s| s.run(&mut TextController)))
        })
        .collect();
    let configs: Vec<NodeConfig> = (0..workers).map(|_| cfg(Role::Worker)).collect();
    thread::scope(|s| {
        for c in configs {
            let work = &work;
            s.spawn(move || {
                let w = Arc::new(DistWorker::join(c).unwrap());
                work(&w);
                w.shutdown().unwrap();
            });
        }
    });
    for t in server_threads {
        t.join().unwrap().unwrap();
    }
    scheduler.join().unwrap().unwrap();
}

#[test]
fn dist_sync_sums_each_round_over_the_workers() {
    with_cluster(2, 2, 5, |w| {
        if w.rank() == 0 {
            w.command_and_wait(ServerCommand::SyncMode, b"").unwrap();
            // Initial values: key 3 (small, one server), key 8 (10 elements >= the bound
            // of 5, split over both servers).
            wait(|d| w.push(3, DType::F32, f32s(&[1.0, 2.0, 3.0]), false, d)).unwrap();
            let big: Vec<f32> = (0..10).map(|i| i as f32).collect();
            wait(|d| w.push(8, DType::F32, f32s(&big), false, d)).unwrap();
        }
        w.barrier(WORKER_GROUP).unwrap();
        let got = wait(|d| w.pull(8, DType::F32, 10, d)).unwrap();
        assert_eq!(
            floats(&got.to_vec()),
            (0..10).map(|i| i as f32).collect::<Vec<_>>()
        );
        let mine = (w.rank() + 1) as f32;
        // A push completes with its round, so the pull after it sees the sum 1 + 2.
        wait(|d| w.push(3, DType::F32, f32s(&[mine; 3]), false, d)).unwrap();
        assert_eq!(
            floats(&wait(|d| w.pull(3, DType::F32, 3, d)).unwrap().to_vec()),
            [3.0; 3]
        );
        let pushed_pulled = wait(|d| w.push(8, DType::F32, f32s(&[mine; 10]), true, d)).unwrap();
        assert_eq!(floats(&pushed_pulled.to_vec()), [3.0; 10]);
        let e = wait(|d| w.pull(3, DType::F32, 4, d))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("key 3: the servers answered 12 bytes where 16 were expected"),
            "{e}"
        );
    });
}

#[test]
fn a_controller_command_installs_the_servers_updater() {
    with_cluster(1, 2, 1_000_000, |w| {
        wait(|d| w.command(ServerCommand::Controller as i32, b"0.5", d)).unwrap();
        if w.rank() == 0 {
            wait(|d| w.command(ServerCommand::SyncMode as i32, b"", d)).unwrap();
            wait(|d| w.push(1, DType::F32, f32s(&[10.0]), false, d)).unwrap();
        }
        w.barrier(WORKER_GROUP).unwrap();
        wait(|d| w.push(1, DType::F32, f32s(&[2.0]), false, d)).unwrap();
        // 10 - 0.5 * (2 + 2)
        assert_eq!(
            floats(&wait(|d| w.pull(1, DType::F32, 1, d)).unwrap().to_vec()),
            [8.0]
        );
    });
}

#[test]
fn a_request_in_flight_fails_when_its_server_is_lost() {
    let port = scheduler_port();
    let c = |role| config(role, port, 1, 1);
    let (sc, svc, wc) = (c(Role::Scheduler), c(Role::Server), c(Role::Worker));
    let scheduler = thread::spawn(move || Van::join(sc).unwrap());
    // A server that joins but never runs, then goes away: its van answers pushes and
    // pulls at once, but a command waits for `run`, so it stays in flight.
    let server = thread::spawn(move || DistServer::join(svc).unwrap());
    let worker = DistWorker::join(wc).unwrap();
    let server = server.join().unwrap();
    let scheduler = scheduler.join().unwrap();
    let (tx, rx) = mpsc::channel();
    worker.command(
        ServerCommand::SyncMode as i32,
        &[],
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    drop(server);
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("an answer within 20 s")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("server rank 0") && e.contains("unreachable"),
        "{e}"
    );
    // Later requests fail at once with the same reason.
    let e = wait(|d| worker.pull(5, DType::F32, 1, d))
        .unwrap_err()
        .to_string();
    assert!(e.contains("server rank 0"), "{e}");
    drop(scheduler);
}

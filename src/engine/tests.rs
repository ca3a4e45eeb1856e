//! Tests of the dependency engine; each runs under all three engine kinds.

// `&[v.clone()]` reads better than `std::slice::from_ref(&v)` next to `&[a, b]`.
#![allow(clippy::cloned_ref_to_slice_refs)]

mod errors;
mod placement;
mod scheduling;
mod stress;

use super::*;
use crate::error::Error;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

const KINDS: [EngineKind; 3] = [
    EngineKind::Naive,
    EngineKind::Threaded,
    EngineKind::ThreadedPerDevice,
];
const CPU: Context = Context::cpu(0);

/// Runs `f` on its own thread and fails if it does not finish within `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => {
            handle.join().expect("test thread");
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result after {secs} s"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("sent nothing without panicking"),
        },
    }
}

/// Runs `test` on a fresh engine of every kind, each bounded in time.
fn for_each_kind(workers: usize, test: fn(Arc<dyn Engine>)) {
    for kind in KINDS {
        let engine: Arc<dyn Engine> = Arc::from(create(kind, workers));
        within(30, kind.name(), move || test(engine));
    }
}

fn threaded(e: &Arc<dyn Engine>) -> bool {
    e.kind() != EngineKind::Naive
}

/// Pushes a synchronous op that runs `f` and succeeds.
fn push(e: &dyn Engine, reads: &[Var], writes: &[Var], f: impl FnOnce() + Send + 'static) {
    let body: SyncFn = Box::new(move |_| {
        f();
        Ok(())
    });
    e.push_sync(body, PushSpec::new("test_op", CPU, reads, writes));
}

fn push_result(e: &dyn Engine, reads: &[Var], writes: &[Var], name: &'static str, r: Result<()>) {
    let body: SyncFn = Box::new(move |_| r);
    e.push_sync(body, PushSpec::new(name, CPU, reads, writes));
}

/// Spins (sleeping a little) until `cond` holds or `secs` pass; returns whether it held.
fn eventually(secs: u64, cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        if Instant::now() > end {
            return false;
        }
        thread::sleep(Duration::from_micros(200));
    }
    true
}

#[test]
fn read_write_order() {
    for_each_kind(2, |e| {
        let v = e.new_variable();
        let cell = Arc::new(AtomicU64::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (c, l) = (cell.clone(), log.clone());
        push(&*e, &[], &[v.clone()], move || {
            thread::sleep(Duration::from_millis(20));
            c.store(1, SeqCst);
            l.lock().push("w1".to_string());
        });
        for _ in 0..2 {
            let (c, l) = (cell.clone(), log.clone());
            push(&*e, &[v.clone()], &[], move || {
                thread::sleep(Duration::from_millis(5));
                l.lock().push(format!("r{}", c.load(SeqCst)));
            });
        }
        let (c, l) = (cell.clone(), log.clone());
        push(&*e, &[], &[v.clone()], move || {
            c.store(2, SeqCst);
            l.lock().push("w2".to_string());
        });
        let (c, l) = (cell.clone(), log.clone());
        push(&*e, &[v.clone()], &[], move || {
            l.lock().push(format!("r{}", c.load(SeqCst)))
        });
        e.wait_for_all().unwrap();
        assert_eq!(*log.lock(), ["w1", "r1", "r1", "w2", "r2"]);
    });
}

#[test]
fn wait_for_var_waits_for_writes_only() {
    for_each_kind(2, |e| {
        let v = e.new_variable();
        let cell = Arc::new(AtomicU64::new(0));
        let c = cell.clone();
        push(&*e, &[], &[v.clone()], move || {
            thread::sleep(Duration::from_millis(20));
            c.store(1, SeqCst);
        });
        e.wait_for_var(&v).unwrap();
        assert_eq!(cell.load(SeqCst), 1);
        if threaded(&e) {
            // A pending read does not hold up a wait: it blocks until after the wait.
            let (tx, rx) = mpsc::channel::<()>();
            push(&*e, &[v.clone()], &[], move || {
                let _ = rx.recv_timeout(Duration::from_secs(5));
            });
            e.wait_for_var(&v).unwrap();
            tx.send(()).unwrap();
        }
        e.wait_for_all().unwrap();
        assert!(v.is_idle());
    });
}

#[test]
fn parallel_reads() {
    for_each_kind(2, |e| {
        let v = e.new_variable();
        let arrived = Arc::new(AtomicUsize::new(0));
        let met = Arc::new(AtomicUsize::new(0));
        let wait = threaded(&e);
        for _ in 0..2 {
            let (a, m) = (arrived.clone(), met.clone());
            push(&*e, &[v.clone()], &[], move || {
                a.fetch_add(1, SeqCst);
                if wait && eventually(5, || a.load(SeqCst) == 2) {
                    m.fetch_add(1, SeqCst);
                }
            });
        }
        let (a, done) = (arrived.clone(), Arc::new(AtomicBool::new(false)));
        let d = done.clone();
        push(&*e, &[], &[v.clone()], move || {
            d.store(a.load(SeqCst) == 2, SeqCst)
        });
        e.wait_for_all().unwrap();
        if wait {
            assert_eq!(met.load(SeqCst), 2, "the two reads did not run together");
        }
        assert!(done.load(SeqCst), "the write ran before both reads");
    });
}

#[test]
fn duplicate_and_read_write_vars() {
    for_each_kind(2, |e| {
        let (a, b, c) = (e.new_variable(), e.new_variable(), e.new_variable());
        let busy = Arc::new(AtomicBool::new(false));
        let overlap = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(AtomicUsize::new(0));
        for _ in 0..4 {
            let (busy, overlap, runs) = (busy.clone(), overlap.clone(), runs.clone());
            let reads = [a.clone(), a.clone(), b.clone()];
            let writes = [a.clone(), c.clone(), c.clone()];
            push(&*e, &reads, &writes, move || {
                if busy.swap(true, SeqCst) {
                    overlap.store(true, SeqCst);
                }
                thread::sleep(Duration::from_millis(2));
                busy.store(false, SeqCst);
                runs.fetch_add(1, SeqCst);
            });
        }
        // Two reads of the same variable in one op count once: the write must follow.
        push(&*e, &[b.clone(), b.clone()], &[], || {});
        push(&*e, &[], &[b.clone()], || {});
        e.wait_for_all().unwrap();
        assert_eq!(runs.load(SeqCst), 4);
        assert!(!overlap.load(SeqCst), "ops writing `a` overlapped");
        assert!(a.is_idle() && b.is_idle() && c.is_idle());
    });
}

#[test]
fn delete_variable_after_last_use() {
    for_each_kind(2, |e| {
        let v = e.new_variable();
        assert!(v.is_idle());
        let finished = Arc::new(AtomicUsize::new(0));
        for _ in 0..5 {
            let f = finished.clone();
            push(&*e, &[v.clone()], &[], move || {
                thread::sleep(Duration::from_millis(5));
                f.fetch_add(1, SeqCst);
            });
        }
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (f, s) = (finished.clone(), seen.clone());
        let deleter: SyncFn = Box::new(move |_| {
            s.store(f.load(SeqCst), SeqCst);
            Ok(())
        });
        e.delete_variable(deleter, CPU, &v);
        e.wait_for_all().unwrap();
        assert_eq!(seen.load(SeqCst), 5);
        assert!(v.is_idle());

        if threaded(&e) {
            let w = e.new_variable();
            let (tx, rx) = mpsc::channel::<()>();
            push(&*e, &[], &[w.clone()], move || {
                let _ = rx.recv_timeout(Duration::from_secs(5));
            });
            assert!(!w.is_idle());
            tx.send(()).unwrap();
            e.wait_for_var(&w).unwrap();
            assert!(w.is_idle());
        }
    });
}

#[test]
fn dedup_of_long_lists() {
    let vars: Vec<Var> = (0..30).map(|_| Var::new()).collect();
    let reads: Vec<Var> = (0..40).map(|i| vars[i % 20].clone()).collect();
    let writes: Vec<Var> = (0..20).map(|i| vars[10 + i % 15].clone()).collect();
    let (r, w) = opr::dedup_vars(&reads, &writes);
    let ids = |l: &[Var]| {
        let mut ids: Vec<usize> = l.iter().map(Var::id).collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(ids(&r), ids(&vars[..10]));
    assert_eq!(ids(&w), ids(&vars[10..25]));
}

#[test]
fn engine_kinds_from_names() {
    for kind in KINDS {
        assert_eq!(EngineKind::from_name(kind.name()), Some(kind));
        assert_eq!(create(kind, 1).kind(), kind);
    }
    assert_eq!(
        EngineKind::from_name(""),
        Some(EngineKind::ThreadedPerDevice)
    );
    assert_eq!(EngineKind::from_name("Bogus"), None);
}

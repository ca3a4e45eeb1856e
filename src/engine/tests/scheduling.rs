//! Scheduling: ops pushed from ops, async completion, priority, pools, blocking callbacks
//! and concurrent waits.

use super::*;

#[test]
fn ops_pushed_from_ops() {
    for_each_kind(2, |e| {
        let [a, b, c] = std::array::from_fn(|_| e.new_variable());
        let count_b = Arc::new(AtomicUsize::new(0));
        let count_c = Arc::new(AtomicUsize::new(0));
        let (e2, cb, cc) = (e.clone(), count_b.clone(), count_c.clone());
        push(&*e, &[], &[a.clone()], move || {
            for _ in 0..10 {
                let (e3, cb, cc, c) = (e2.clone(), cb.clone(), cc.clone(), c.clone());
                push(&*e2, &[a.clone()], &[b.clone()], move || {
                    cb.fetch_add(1, SeqCst);
                    push(&*e3, &[], &[c], move || {
                        cc.fetch_add(1, SeqCst);
                    });
                });
            }
        });
        e.wait_for_all().unwrap();
        assert_eq!(count_b.load(SeqCst), 10);
        assert_eq!(count_c.load(SeqCst), 10);

        // The last handle of an engine may go away inside one of its own ops.
        let inner: Arc<dyn Engine> = Arc::from(create(e.kind(), 2));
        let v = inner.new_variable();
        let ran = Arc::new(AtomicBool::new(false));
        let (keep, r) = (inner.clone(), ran.clone());
        push(&*inner, &[], &[v], move || {
            thread::sleep(Duration::from_millis(5));
            r.store(true, SeqCst);
            drop(keep);
        });
        drop(inner);
        assert!(eventually(5, || ran.load(SeqCst)));
    });
}

#[test]
fn async_ops_completed_elsewhere() {
    for_each_kind(2, |e| {
        let v = e.new_variable();
        let cell = Arc::new(AtomicU64::new(0));
        for i in 1..=5 {
            let c = cell.clone();
            let body: AsyncFn = Box::new(move |_, done| {
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(2));
                    assert_eq!(c.load(SeqCst), i - 1);
                    c.store(i, SeqCst);
                    done.done(Ok(()));
                });
            });
            e.push_async(
                body,
                PushSpec::new("async", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
            );
        }
        let (c, seen) = (cell.clone(), Arc::new(AtomicU64::new(0)));
        let s = seen.clone();
        push(&*e, &[v.clone()], &[], move || {
            s.store(c.load(SeqCst), SeqCst)
        });
        e.wait_for_all().unwrap();
        assert_eq!(seen.load(SeqCst), 5);
    });
}

#[test]
fn high_priority_runs_first() {
    for_each_kind(1, |e| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let gate = e.new_variable();
        let (release, rx) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let hold = threaded(&e);
        push(&*e, &[], &[gate], move || {
            if hold {
                started_tx.send(()).unwrap();
                let _ = rx.recv_timeout(Duration::from_secs(5));
            }
        });
        if hold {
            started.recv_timeout(Duration::from_secs(5)).unwrap();
        }
        for i in 0..5 {
            let l = log.clone();
            let v = e.new_variable();
            push(&*e, &[], &[v], move || l.lock().push(format!("n{i}")));
        }
        let l = log.clone();
        let body: SyncFn = Box::new(move |_| {
            l.lock().push("high".to_string());
            Ok(())
        });
        e.push_sync(
            body,
            PushSpec::new("high", CPU, &[], &[e.new_variable()]).priority(5),
        );
        release.send(()).ok();
        e.wait_for_all().unwrap();
        let log = log.lock();
        assert_eq!(log.len(), 6);
        if hold {
            assert_eq!(log[0], "high", "{log:?}");
        }
    });
}

#[test]
fn prioritized_and_gpu_pools_are_separate() {
    let e: Arc<dyn Engine> = Arc::from(create(EngineKind::ThreadedPerDevice, 1));
    within(30, "per-device pools", move || {
        let (release, rx) = mpsc::channel::<()>();
        push(&*e, &[], &[e.new_variable()], move || {
            let _ = rx.recv_timeout(Duration::from_secs(10));
        });
        // The only cpu(0) worker is busy; these still run.
        for (ctx, prop) in [
            (CPU, FnProperty::CpuPrioritized),
            (Context::gpu(0), FnProperty::Normal),
            (Context::gpu(0), FnProperty::CopyFromGpu),
            (Context::cpu(1), FnProperty::Normal),
            (Context::cpu(1000), FnProperty::Normal),
        ] {
            let v = e.new_variable();
            let body: SyncFn = Box::new(move |rctx| {
                assert_eq!(rctx.ctx, ctx);
                Ok(())
            });
            e.push_sync(
                body,
                PushSpec::new("elsewhere", ctx, &[], &[v.clone()]).prop(prop),
            );
            match e.wait_for_var(&v) {
                Ok(()) => assert!(ctx.is_cpu()),
                // With no GPU backend, a GPU op runs and fails at once, naming the device.
                Err(err) => assert!(!ctx.is_cpu() && err.message().contains("gpu(0)"), "{err}"),
            }
        }
        release.send(()).unwrap();
        let _ = e.wait_for_all();
    });
}

#[test]
fn callbacks_may_block_on_the_waiting_thread() {
    // Like the Python GIL: the pushing thread holds a lock that the op body needs, and
    // releases it only while it waits. (The NaiveEngine runs ops inside `push`, so it
    // cannot do this.)
    for kind in [EngineKind::Threaded, EngineKind::ThreadedPerDevice] {
        let e: Arc<dyn Engine> = Arc::from(create(kind, 2));
        within(30, kind.name(), move || {
            let gil = Arc::new(Mutex::new(0u64));
            let v = e.new_variable();
            let mut held = gil.lock();
            for i in 1..=50u64 {
                let g = gil.clone();
                push(&*e, &[], &[v.clone()], move || *g.lock() = i);
                drop(held);
                e.wait_for_var(&v).unwrap();
                held = gil.lock();
                assert_eq!(*held, i);
            }
            drop(held);
            e.wait_for_all().unwrap();
        });
    }
}

#[test]
fn concurrent_waiters() {
    for_each_kind(2, |e| {
        let threads = if threaded(&e) { 4 } else { 1 };
        thread::scope(|s| {
            for t in 0..threads {
                let e = &e;
                s.spawn(move || {
                    let v = e.new_variable();
                    let count = Arc::new(AtomicUsize::new(0));
                    for i in 0..200 {
                        let c = count.clone();
                        push(&**e, &[], &[v.clone()], move || {
                            c.fetch_add(1, SeqCst);
                        });
                        if i % 20 == 0 {
                            e.wait_for_var(&v).unwrap();
                            assert_eq!(count.load(SeqCst), i + 1);
                        }
                        if t < 2 && i % 50 == 0 {
                            e.wait_for_all().unwrap();
                        }
                    }
                    e.wait_for_var(&v).unwrap();
                    assert_eq!(count.load(SeqCst), 200);
                });
            }
        });
        e.wait_for_all().unwrap();
    });
}

#[test]
fn ready_prioritised_ops_run_highest_priority_first() {
    // One worker, held busy while the prioritised ops become ready together.
    let engine: Arc<dyn Engine> = Arc::from(create(EngineKind::Threaded, 1));
    within(30, "priority order", move || {
        let (release, hold) = mpsc::channel::<()>();
        let gate = Var::new();
        engine.push_sync(
            Box::new(move |_| {
                let _ = hold.recv();
                Ok(())
            }),
            PushSpec::new("gate", CPU, &[], &[gate.clone()]).prop(FnProperty::CpuPrioritized),
        );
        let order = Arc::new(Mutex::new(Vec::new()));
        for p in [-3, -1, -2, 5, -1] {
            let order = order.clone();
            engine.push_sync(
                Box::new(move |_| {
                    order.lock().push(p);
                    Ok(())
                }),
                PushSpec::new("prioritised", CPU, &[gate.clone()], &[Var::new()])
                    .prop(FnProperty::CpuPrioritized)
                    .priority(p),
            );
        }
        release.send(()).unwrap();
        engine.wait_for_all().unwrap();
        assert_eq!(*order.lock(), vec![5, -1, -1, -2, -3]);
    });
}

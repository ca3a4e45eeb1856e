//! Placement: which threads run a device's ops, how CPU devices share workers, and what
//! a running op sees of its worker (the stream slot).

use super::*;
use crate::engine::threads::{cpu_workers_for, kernel_threads_for};
use std::collections::HashSet;

/// The names of the threads that ran `n` independent ops pushed for `ctx`.
fn worker_names(e: &dyn Engine, ctx: Context, n: usize) -> HashSet<String> {
    let started = Arc::new(AtomicUsize::new(0));
    let names = Arc::new(Mutex::new(HashSet::new()));
    for _ in 0..n {
        let (started, names) = (started.clone(), names.clone());
        let body: SyncFn = Box::new(move |_| {
            started.fetch_add(1, SeqCst);
            names
                .lock()
                .insert(thread::current().name().unwrap_or("").to_string());
            Ok(())
        });
        e.push_sync(body, PushSpec::new("where", ctx, &[], &[Var::new()]));
    }
    e.wait_for_all().unwrap();
    assert_eq!(started.load(SeqCst), n);
    let names = names.lock().clone();
    names
}

#[test]
fn cpu_devices_share_one_pool_by_default() {
    let e = create_with(EngineKind::ThreadedPerDevice, CpuWorkers::Shared(2));
    within(30, "shared cpu pool", move || {
        let mut all = HashSet::new();
        for dev in 0..3 {
            let names = worker_names(&*e, Context::cpu(dev), 20);
            assert!(
                names.iter().all(|n| n.starts_with("rsmx-cpu0-")),
                "{names:?}"
            );
            all.extend(names);
        }
        assert!(all.len() <= 2, "more CPU workers than asked: {all:?}");
    });
}

#[test]
fn an_explicit_cpu_worker_count_is_per_device() {
    let e = create(EngineKind::ThreadedPerDevice, 1);
    within(30, "per-device cpu pools", move || {
        for dev in [0, 1, 40] {
            let names = worker_names(&*e, Context::cpu(dev), 5);
            let want = format!("rsmx-cpu{dev}-0");
            assert_eq!(names, HashSet::from([want]));
        }
    });
}

#[test]
fn the_cpu_worker_setting_decides_the_sharing() {
    assert_eq!(cpu_workers_for(None, None, 8), CpuWorkers::Shared(8));
    assert_eq!(cpu_workers_for(Some(3), None, 8), CpuWorkers::PerDevice(3));
    // OMP_NUM_THREADS bounds the shared pool, never an explicit count.
    assert_eq!(cpu_workers_for(None, Some(1), 8), CpuWorkers::Shared(1));
    assert_eq!(cpu_workers_for(None, Some(16), 8), CpuWorkers::Shared(8));
    assert_eq!(
        cpu_workers_for(Some(3), Some(1), 8),
        CpuWorkers::PerDevice(3)
    );
    // A zero count still starts a worker.
    let e = create_with(EngineKind::ThreadedPerDevice, CpuWorkers::Shared(0));
    within(30, "zero workers", move || {
        assert_eq!(worker_names(&*e, CPU, 3).len(), 1);
    });
}

#[test]
fn omp_num_threads_sizes_the_kernel_pool_unless_rayon_is_told() {
    assert_eq!(kernel_threads_for(Some(1), false), Some(1));
    assert_eq!(kernel_threads_for(Some(1), true), None);
    assert_eq!(kernel_threads_for(None, false), None);
}

#[test]
fn naive_runs_ops_on_the_pushing_thread() {
    let e = create(EngineKind::Naive, 4);
    let me = thread::current().id();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let body: SyncFn = Box::new(move |_| {
        assert_eq!(thread::current().id(), me);
        r.store(true, SeqCst);
        Ok(())
    });
    e.push_sync(body, PushSpec::new("inline", CPU, &[], &[Var::new()]));
    assert!(ran.load(SeqCst), "push returned before the op ran");

    // An async op completed by another thread is done when `push` returns.
    let v = Var::new();
    let done_flag = Arc::new(AtomicBool::new(false));
    let d = done_flag.clone();
    let body: AsyncFn = Box::new(move |_, done| {
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            d.store(true, SeqCst);
            done.done(Err(Error::Runtime("late failure".into())));
        });
    });
    e.push_async(
        body,
        PushSpec::new("async", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
    );
    assert!(
        done_flag.load(SeqCst),
        "push returned before the completion"
    );
    assert!(v.is_idle());
    let err = e.wait_for_var(&v).unwrap_err().to_string();
    assert!(err.contains("late failure"), "{err}");
}

#[test]
fn cpu_ops_see_no_stream() {
    for_each_kind(2, |e| {
        for (ctx, prop) in [
            (CPU, FnProperty::Normal),
            (Context::cpu(1), FnProperty::CpuPrioritized),
        ] {
            let seen = Arc::new(Mutex::new(None));
            let s = seen.clone();
            let body: SyncFn = Box::new(move |rctx| {
                *s.lock() = Some(rctx);
                Ok(())
            });
            let v = e.new_variable();
            e.push_sync(
                body,
                PushSpec::new("cpu", ctx, &[], &[v.clone()]).prop(prop),
            );
            e.wait_for_var(&v).unwrap();
            assert_eq!(*seen.lock(), Some(RunContext { ctx, stream: None }));
        }
    });
}

#[test]
fn a_stream_handle_is_an_opaque_pointer() {
    fn send_copy<T: Send + Sync + Copy + 'static>(_: T) {}
    assert_eq!(
        std::mem::size_of::<Option<StreamHandle>>(),
        std::mem::size_of::<usize>()
    );
    assert!(StreamHandle::from_raw(std::ptr::null_mut()).is_none());
    let raw = 0x1000 as *mut std::ffi::c_void;
    let h = StreamHandle::from_raw(raw).unwrap();
    assert_eq!(h.as_raw(), raw);
    send_copy(h);

    // What a GPU worker will do: hand its stream to the op it runs, on another thread.
    let rctx = RunContext {
        ctx: Context::gpu(0),
        stream: Some(h),
    };
    let seen = thread::spawn(move || rctx.stream.map(|s| s.as_raw() as usize))
        .join()
        .unwrap();
    assert_eq!(seen, Some(raw as usize));
    assert_eq!(RunContext::new(Context::gpu(0)).stream, None);
}

#[test]
fn async_cpu_ops_start_on_the_thread_that_lets_them_through() {
    for_each_kind(2, |e| {
        let here = thread::current().id();
        // Ready at once: the body runs inside `push_async`, on this thread.
        let v = e.new_variable();
        let seen = Arc::new(Mutex::new(None));
        let s = seen.clone();
        let body: AsyncFn = Box::new(move |_, done| {
            *s.lock() = Some(thread::current().id());
            done.done(Ok(()));
        });
        e.push_async(
            body,
            PushSpec::new("async", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
        );
        assert_eq!(*seen.lock(), Some(here));
        if !threaded(&e) {
            return; // The NaiveEngine's push waits for the op's completion.
        }

        // Waiting on an op another thread completes: it starts on that thread.
        let (finish, finished) = mpsc::channel::<OnComplete>();
        e.push_async(
            Box::new(move |_, done| finish.send(done).unwrap()),
            PushSpec::new("held", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
        );
        let s = seen.clone();
        e.push_async(
            Box::new(move |_, done| {
                *s.lock() = Some(thread::current().id());
                done.done(Ok(()));
            }),
            PushSpec::new("next", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
        );
        let held = finished.recv().unwrap();
        let completer = thread::spawn(move || {
            held.done(Ok(()));
            thread::current().id()
        });
        let completer = completer.join().unwrap();
        e.wait_for_var(&v).unwrap();
        assert_eq!(*seen.lock(), Some(completer));

        // A long chain of ops completing inside their bodies, let through at once, does
        // not recurse without bound: past a few levels the next one goes to a worker.
        let (finish, finished) = mpsc::channel::<OnComplete>();
        e.push_async(
            Box::new(move |_, done| finish.send(done).unwrap()),
            PushSpec::new("held", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
        );
        let count = Arc::new(AtomicUsize::new(0));
        for _ in 0..20_000 {
            let c = count.clone();
            e.push_async(
                Box::new(move |_, done| {
                    c.fetch_add(1, SeqCst);
                    done.done(Ok(()));
                }),
                PushSpec::new("chain", CPU, &[], &[v.clone()]).prop(FnProperty::Async),
            );
        }
        finished.recv().unwrap().done(Ok(()));
        e.wait_for_all().unwrap();
        assert_eq!(count.load(SeqCst), 20_000);
    });
}

//! Errors and panics in ops: where they surface (once), and that the engine keeps working.

use super::*;

/// A flag and a closure that sets it.
fn flag() -> (Arc<AtomicBool>, impl FnOnce() + Send + 'static) {
    let f = Arc::new(AtomicBool::new(false));
    let g = f.clone();
    (f, move || g.store(true, SeqCst))
}

#[test]
fn errors_skip_downstream_ops_and_surface_there() {
    for_each_kind(2, |e| {
        let [a, b, c, d, f] = std::array::from_fn(|_| e.new_variable());
        let boom = Error::Value("boom".to_string());
        push_result(&*e, &[], &[a.clone()], "fails", Err(boom.clone()));
        let (ran_b, set_b) = flag();
        push(&*e, &[a.clone()], &[b.clone()], set_b);
        let (ran_c, set_c) = flag();
        push(&*e, &[b.clone()], &[c.clone()], set_c);
        let (ran_d, set_d) = flag();
        push(&*e, &[], &[d.clone()], set_d);
        // A deletion runs even though what it reads failed.
        let (deleted, set_deleted) = flag();
        let deleter: SyncFn = Box::new(move |_| {
            set_deleted();
            Ok(())
        });
        e.push_sync(
            deleter,
            PushSpec::new("del", CPU, &[b.clone()], &[f.clone()]).prop(FnProperty::DeleteVar),
        );

        // The error reaches `c` through `b`; raised there, it is raised everywhere.
        assert_eq!(e.wait_for_var(&c), Err(boom.clone()));
        assert_eq!(e.wait_for_var(&a), Ok(()));
        assert_eq!(e.wait_for_var(&b), Ok(()));
        assert_eq!(e.wait_for_var(&d), Ok(()));
        assert_eq!(e.wait_for_var(&f), Ok(()));
        assert_eq!(e.wait_for_all(), Ok(()));
        assert!(!ran_b.load(SeqCst) && !ran_c.load(SeqCst));
        assert!(ran_d.load(SeqCst) && deleted.load(SeqCst));

        // Once raised, the variables are clean: new readers run.
        let (ran, set) = flag();
        push(&*e, &[a.clone(), b.clone()], &[c.clone()], set);
        e.wait_for_all().unwrap();
        assert!(ran.load(SeqCst));
    });
}

#[test]
fn errors_surface_once_at_the_written_var_or_wait_for_all() {
    for_each_kind(2, |e| {
        let [a, b, c] = std::array::from_fn(|_| e.new_variable());
        let boom = Error::Value("boom".to_string());

        push_result(&*e, &[], &[a.clone()], "fails", Err(boom.clone()));
        assert_eq!(e.wait_for_var(&a), Err(boom.clone()));
        assert_eq!(e.wait_for_var(&a), Ok(()));
        assert_eq!(e.wait_for_all(), Ok(()));

        push_result(&*e, &[], &[a.clone()], "fails", Err(boom.clone()));
        push(&*e, &[a.clone()], &[b.clone()], || {});
        let other = Error::Runtime("other".to_string());
        push_result(&*e, &[b.clone()], &[c.clone()], "fails too", Err(other));
        // The first error is raised; every pending one is cleared.
        assert_eq!(e.wait_for_all(), Err(boom.clone()));
        assert_eq!(e.wait_for_all(), Ok(()));
        assert_eq!(e.wait_for_var(&a), Ok(()));
        assert_eq!(e.wait_for_var(&b), Ok(()));
        assert_eq!(e.wait_for_var(&c), Ok(()));

        // The engine keeps working: `a` is written again, and an async op fails.
        let again = Arc::new(AtomicUsize::new(0));
        let g = again.clone();
        push(&*e, &[], &[a.clone()], move || {
            g.fetch_add(1, SeqCst);
        });
        let g = again.clone();
        push(&*e, &[a.clone()], &[b.clone()], move || {
            g.fetch_add(1, SeqCst);
        });
        let late = Error::Runtime("late".to_string());
        let l = late.clone();
        let body: AsyncFn = Box::new(move |_, done| {
            thread::spawn(move || done.done(Err(l)));
        });
        e.push_async(
            body,
            PushSpec::new("async_fail", CPU, &[], &[c.clone()]).prop(FnProperty::Async),
        );
        assert_eq!(e.wait_for_var(&b), Ok(()));
        assert_eq!(e.wait_for_var(&c), Err(late));
        assert_eq!(e.wait_for_all(), Ok(()));
        assert_eq!(again.load(SeqCst), 2);
    });
}

#[test]
fn panicking_ops_become_errors() {
    for_each_kind(1, |e| {
        let [a, b, c] = std::array::from_fn(|_| e.new_variable());
        let body: SyncFn = Box::new(|_| panic!("kaboom"));
        e.push_sync(body, PushSpec::new("panicky", CPU, &[], &[a.clone()]));
        let body: AsyncFn = Box::new(|_, _done| panic!("async kaboom {}", 7));
        e.push_async(
            body,
            PushSpec::new("panicky_async", CPU, &[], &[b.clone()]).prop(FnProperty::Async),
        );
        // Forgetting to complete is an error too, not a hang.
        let body: AsyncFn = Box::new(|_, done| drop(done));
        e.push_async(
            body,
            PushSpec::new("forgetful", CPU, &[], &[c.clone()]).prop(FnProperty::Async),
        );
        let msg = |r: Result<()>| r.unwrap_err().to_string();
        assert_eq!(msg(e.wait_for_var(&b)), "panicky_async: async kaboom 7");
        assert!(msg(e.wait_for_var(&c)).starts_with("forgetful: "));
        assert_eq!(msg(e.wait_for_all()), "panicky: kaboom");
        assert_eq!(e.wait_for_var(&a), Ok(()));
        // The (single) worker survived.
        let (ok, set) = flag();
        push(&*e, &[], &[a.clone()], set);
        e.wait_for_all().unwrap();
        assert!(ok.load(SeqCst));
    });
}

#[test]
fn a_variable_handed_over_keeps_old_errors_from_its_new_owner() {
    for_each_kind(2, |e| {
        let [gate, v, old_reader, new_reader, later_reader] =
            std::array::from_fn(|_| e.new_variable());
        let boom = Error::Value("boom".to_string());
        let (open, closed) = mpsc::channel::<()>();
        if threaded(&e) {
            // Holds the old owner's ops in the queue until the new owner has pushed.
            push(&*e, &[], &[gate.clone()], move || {
                let _ = closed.recv_timeout(Duration::from_secs(5));
            });
        }
        let body: SyncFn = Box::new(move |_| Err(boom));
        e.push_sync(
            body,
            PushSpec::new("fails", CPU, &[gate.clone()], &[v.clone()]),
        );
        let (ran_old, set_old) = flag();
        push(&*e, &[v.clone()], &[old_reader.clone()], set_old);

        // Two owners in turn, each writing and reading before the old ops have run.
        let mut ran = Vec::new();
        for reader in [&new_reader, &later_reader] {
            v.hand_over();
            let (ran_first, set_first) = flag();
            push(&*e, &[], &[v.clone()], set_first);
            let (ran_new, set_new) = flag();
            push(&*e, &[v.clone()], &[reader.clone()], set_new);
            ran.extend([ran_first, ran_new]);
        }
        let _ = open.send(());

        assert_eq!(e.wait_for_var(&new_reader), Ok(()));
        assert_eq!(e.wait_for_var(&later_reader), Ok(()));
        assert_eq!(e.wait_for_var(&v), Ok(()));
        assert!(ran.iter().all(|r| r.load(SeqCst)));
        // The reader pushed before the hand-over saw the failed write, and the engine
        // still raises the error once.
        assert_eq!(
            e.wait_for_var(&old_reader),
            Err(Error::Value("boom".into()))
        );
        assert!(!ran_old.load(SeqCst));
        assert_eq!(e.wait_for_all(), Ok(()));
    });
}

//! Randomized stress test: random read/write sets over a few variables, checked against a
//! sequential replay in push order.

use super::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use std::collections::HashMap;
use std::ops::Range;

const OPS: usize = 3000;
const VARS: usize = 40;

/// The (deduplicated) variables of one op, by index.
#[derive(Clone)]
struct Spec {
    reads: Vec<usize>,
    writes: Vec<usize>,
}

/// What one op saw: the value of each variable it read, and of each it wrote, before
/// writing its own id there.
#[derive(Debug, PartialEq)]
struct Seen {
    reads: Vec<u64>,
    overwritten: Vec<u64>,
}

struct State {
    cells: Vec<AtomicU64>,
    readers: Vec<AtomicUsize>,
    writers: Vec<AtomicUsize>,
    violations: AtomicUsize,
    seen: Mutex<HashMap<u64, Seen>>,
    next_id: AtomicU64,
}

impl State {
    /// The op body: check exclusion, record what is visible, write the op's id.
    fn run(&self, id: u64, spec: &Spec, work: u32) {
        for &r in &spec.reads {
            self.readers[r].fetch_add(1, SeqCst);
            if self.writers[r].load(SeqCst) != 0 {
                self.violations.fetch_add(1, SeqCst);
            }
        }
        for &w in &spec.writes {
            if self.writers[w].swap(1, SeqCst) != 0 || self.readers[w].load(SeqCst) != 0 {
                self.violations.fetch_add(1, SeqCst);
            }
        }
        let seen = Seen {
            reads: spec
                .reads
                .iter()
                .map(|&r| self.cells[r].load(SeqCst))
                .collect(),
            overwritten: spec
                .writes
                .iter()
                .map(|&w| self.cells[w].load(SeqCst))
                .collect(),
        };
        match work % 10 {
            0 => thread::sleep(Duration::from_micros(u64::from(work % 50))),
            1..=3 => (0..work * 20).for_each(|_| std::hint::spin_loop()),
            _ => {}
        }
        for &w in &spec.writes {
            self.cells[w].store(id, SeqCst);
            self.writers[w].store(0, SeqCst);
        }
        for &r in &spec.reads {
            self.readers[r].fetch_sub(1, SeqCst);
        }
        self.seen.lock().insert(id, seen);
    }
}

/// Random raw variable lists (with duplicates and overlaps) and their dedup'd spec.
fn random_op(rng: &mut Pcg64, vars: Range<usize>) -> (Vec<usize>, Vec<usize>, Spec) {
    let reads: Vec<usize> = (0..rng.gen_range(0..=3))
        .map(|_| rng.gen_range(vars.clone()))
        .collect();
    let mut writes: Vec<usize> = (0..rng.gen_range(0..=2))
        .map(|_| rng.gen_range(vars.clone()))
        .collect();
    if reads.is_empty() && writes.is_empty() {
        writes.push(rng.gen_range(vars));
    }
    let mut w = writes.clone();
    w.sort_unstable();
    w.dedup();
    let mut r: Vec<usize> = reads.iter().copied().filter(|x| !w.contains(x)).collect();
    r.sort_unstable();
    r.dedup();
    (
        reads,
        writes,
        Spec {
            reads: r,
            writes: w,
        },
    )
}

/// Pushes `OPS` random ops from several threads. With `shared`, all threads use all
/// variables and push under a lock, so that the push order is known; otherwise each
/// thread has its own variables and pushes freely.
fn stress(e: Arc<dyn Engine>, shared: bool, seed: u64) {
    let threads = if threaded(&e) { 3 } else { 1 };
    let vars: Vec<Var> = (0..VARS).map(|_| e.new_variable()).collect();
    let st = Arc::new(State {
        cells: (0..VARS).map(|_| AtomicU64::new(0)).collect(),
        readers: (0..VARS).map(|_| AtomicUsize::new(0)).collect(),
        writers: (0..VARS).map(|_| AtomicUsize::new(0)).collect(),
        violations: AtomicUsize::new(0),
        seen: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
    });
    // Async ops finish on this thread.
    let (helper_tx, helper_rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
    let helper = thread::spawn(move || helper_rx.into_iter().for_each(|job| job()));
    let order = Mutex::new(Vec::new());
    let lists: Vec<Vec<(u64, Spec)>> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (e, vars, st, order) = (&e, &vars, &st, &order);
                let helper_tx = helper_tx.clone();
                s.spawn(move || {
                    let mut rng = Pcg64::seed_from_u64(seed * 100 + t as u64);
                    let range = if shared {
                        0..VARS
                    } else {
                        t * VARS / threads..(t + 1) * VARS / threads
                    };
                    let mut mine = Vec::new();
                    for _ in 0..OPS / threads {
                        let (reads, writes, spec) = random_op(&mut rng, range.clone());
                        let reads: Vec<Var> = reads.iter().map(|&i| vars[i].clone()).collect();
                        let writes: Vec<Var> = writes.iter().map(|&i| vars[i].clone()).collect();
                        let work: u32 = rng.gen_range(0..100);
                        let is_async = rng.gen_ratio(1, 10);
                        let mut guard = shared.then(|| order.lock());
                        let id = st.next_id.fetch_add(1, SeqCst);
                        let (st2, spec2) = (st.clone(), spec.clone());
                        if is_async {
                            let tx = helper_tx.clone();
                            let body: AsyncFn = Box::new(move |_, done| {
                                let job = move || {
                                    st2.run(id, &spec2, work);
                                    done.done(Ok(()));
                                };
                                tx.send(Box::new(job)).unwrap();
                            });
                            e.push_async(
                                body,
                                PushSpec::new("a", CPU, &reads, &writes).prop(FnProperty::Async),
                            );
                        } else {
                            let body: SyncFn = Box::new(move |_| {
                                st2.run(id, &spec2, work);
                                Ok(())
                            });
                            e.push_sync(body, PushSpec::new("s", CPU, &reads, &writes));
                        }
                        match guard.as_mut() {
                            Some(order) => order.push((id, spec)),
                            None => mine.push((id, spec)),
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    e.wait_for_all().unwrap();
    drop(helper_tx);
    helper.join().unwrap();

    assert_eq!(st.violations.load(SeqCst), 0, "reads and writes overlapped");
    let seen = st.seen.lock();
    assert_eq!(seen.len(), OPS / threads * threads);
    let mut replay = [0u64; VARS];
    let lists = if shared {
        vec![order.into_inner()]
    } else {
        lists
    };
    for list in lists {
        for (id, spec) in list {
            let expect = Seen {
                reads: spec.reads.iter().map(|&r| replay[r]).collect(),
                overwritten: spec.writes.iter().map(|&w| replay[w]).collect(),
            };
            assert_eq!(seen.get(&id), Some(&expect), "op {id}");
            for &w in &spec.writes {
                replay[w] = id;
            }
        }
    }
    for v in &vars {
        assert!(v.is_idle());
    }
}

#[test]
fn random_stress_shared_vars() {
    for_each_kind(2, |e| stress(e, true, 1));
}

#[test]
fn random_stress_own_vars() {
    for_each_kind(2, |e| stress(e, false, 2));
}

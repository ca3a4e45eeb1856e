//! Engine overhead benchmarks: push + schedule + complete of tiny ops, and the parallel
//! speed-up of independent chains of spin work (and of sleeping work).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rsmx::context::Context;
use rsmx::engine::{create, Engine, EngineKind, PushSpec, SyncFn, Var};
use std::hint::black_box;
use std::time::Duration;

const TINY_OPS: usize = 20_000;
const CPU: Context = Context::cpu(0);

fn push_noop(e: &dyn Engine, writes: &[Var]) {
    let body: SyncFn = Box::new(|_| Ok(()));
    e.push_sync(body, PushSpec::new("noop", CPU, &[], writes));
}

/// Busy arithmetic, about 20 µs on a current core: CPU work, so that two chains can only
/// be faster than one by running on two cores at once.
fn spin_work(iters: u64) -> u64 {
    let mut x = black_box(1u64);
    for _ in 0..iters {
        x = black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
    x
}

fn tiny_ops(c: &mut Criterion) {
    let workers = 2;
    let mut g = c.benchmark_group("tiny_ops");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(TINY_OPS as u64));
    for kind in [
        EngineKind::Naive,
        EngineKind::Threaded,
        EngineKind::ThreadedPerDevice,
    ] {
        let e = create(kind, workers);
        let one = e.new_variable();
        g.bench_function(BenchmarkId::new("one_chain", kind.name()), |b| {
            b.iter(|| {
                for _ in 0..TINY_OPS {
                    push_noop(&*e, std::slice::from_ref(&one));
                }
                e.wait_for_all().unwrap();
            })
        });
        let vars: Vec<Var> = (0..TINY_OPS).map(|_| e.new_variable()).collect();
        g.bench_function(BenchmarkId::new("independent", kind.name()), |b| {
            b.iter(|| {
                for v in &vars {
                    push_noop(&*e, std::slice::from_ref(v));
                }
                e.wait_for_all().unwrap();
            })
        });
    }
    g.finish();
}

fn parallel_chains(c: &mut Criterion) {
    const OPS: usize = 200;
    let mut g = c.benchmark_group("spin_chains");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(OPS as u64));
    let e = create(EngineKind::ThreadedPerDevice, 2);
    let vars = [e.new_variable(), e.new_variable()];
    // Baselines: the work on this thread, and split over two plain threads (the best
    // speed-up this machine allows right now).
    let work = |n: usize| (0..n).map(|_| spin_work(20_000)).fold(0, u64::wrapping_add);
    g.bench_function("no_engine", |b| b.iter(|| work(OPS)));
    g.bench_function("two_plain_threads", |b| {
        b.iter(|| {
            std::thread::scope(|s| {
                let h = s.spawn(|| work(OPS / 2));
                work(OPS / 2).wrapping_add(h.join().unwrap())
            })
        })
    });
    for chains in [1usize, 2] {
        g.bench_function(BenchmarkId::new("chains", chains), |b| {
            b.iter(|| push_chains(&*e, &vars[..chains], OPS, || black_box(spin_work(20_000))))
        });
    }
    g.finish();

    // The same with ops that wait instead of computing (I/O, a GPU): their overlap does
    // not depend on free cores.
    const SLEEPS: usize = 40;
    let mut g = c.benchmark_group("sleep_chains");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(SLEEPS as u64));
    for chains in [1usize, 2] {
        g.bench_function(BenchmarkId::new("chains", chains), |b| {
            b.iter(|| {
                push_chains(&*e, &vars[..chains], SLEEPS, || {
                    std::thread::sleep(Duration::from_micros(250))
                })
            })
        });
    }
    g.finish();
}

/// Pushes `ops` ops running `work`, round-robin over `vars` (one chain per variable),
/// and waits for them.
fn push_chains<R: 'static>(e: &dyn Engine, vars: &[Var], ops: usize, work: fn() -> R) {
    for i in 0..ops {
        let body: SyncFn = Box::new(move |_| {
            black_box(work());
            Ok(())
        });
        let v = std::slice::from_ref(&vars[i % vars.len()]);
        e.push_sync(body, PushSpec::new("work", CPU, &[], v));
    }
    e.wait_for_all().unwrap();
}

criterion_group!(benches, tiny_ops, parallel_chains);
criterion_main!(benches);

//! Memory pool benchmarks: pooled alloc/free against the system allocator.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rsmx::context::Context;
use rsmx::storage;
use std::alloc::{alloc, dealloc, Layout};

fn pool(c: &mut Criterion) {
    let ctx = Context::cpu(0);
    let mut g = c.benchmark_group("storage");
    for &size in &[40usize, 4096, 1 << 20, 64 << 20] {
        // Warm the bucket so the loop measures reuse.
        drop(storage::alloc(ctx, size).unwrap());
        g.bench_function(format!("pool_alloc_free_{size}B"), |b| {
            b.iter(|| {
                let blk = storage::alloc(ctx, black_box(size)).unwrap();
                black_box(blk.ptr());
            })
        });
        g.bench_function(format!("system_alloc_touch_free_{size}B"), |b| {
            let layout = Layout::from_size_align(size, 64).unwrap();
            b.iter(|| {
                // SAFETY: layout has a non-zero size; the block is freed with the same layout.
                unsafe {
                    let p = alloc(layout);
                    // Touch every page, as a kernel writing the block would.
                    for off in (0..size).step_by(4096) {
                        p.add(off).write_volatile(1);
                    }
                    black_box(p);
                    dealloc(p, layout);
                }
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = pool
}
criterion_main!(benches);

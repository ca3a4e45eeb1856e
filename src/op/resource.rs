//! Resources an operator asks the device for (MXNet's `FResourceRequest`): the device's
//! random generator, ordered by an engine variable, and temporary space from the device's
//! memory pool.

use crate::context::Context;
use crate::engine::{self, PushSpec, Var};
use crate::error::{Error, Result};
use crate::storage::{self, Block};
use parking_lot::Mutex;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A resource an operator's kernels need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceRequest {
    /// The device's random generator (its users are ordered by one engine variable).
    Random,
    /// Scratch memory from the device's pool, valid while the kernel runs.
    TempSpace,
}

/// A device's random generator state, as that device's kernels use it.
pub trait DeviceRng: Send {
    /// The generator as host code draws from it; `None` for a device whose kernels draw
    /// on the device itself.
    fn host(&mut self) -> Option<&mut Pcg64Mcg>;
    /// Restarts the generator from `seed`, mixed with the device.
    fn reseed(&mut self, seed: u64);
}

/// The host generator of a CPU device.
pub struct HostRng {
    gen: Pcg64Mcg,
    ctx: Context,
}

impl HostRng {
    /// The generator of `ctx` started from `seed`.
    pub fn new(seed: u64, ctx: Context) -> HostRng {
        HostRng {
            gen: seeded(seed, ctx),
            ctx,
        }
    }
}

impl DeviceRng for HostRng {
    fn host(&mut self) -> Option<&mut Pcg64Mcg> {
        Some(&mut self.gen)
    }

    fn reseed(&mut self, seed: u64) {
        self.gen = seeded(seed, self.ctx);
    }
}

fn seeded(seed: u64, ctx: Context) -> Pcg64Mcg {
    let mix = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((ctx.dev_type as u64) << 32 | ctx.dev_id as u32 as u64);
    Pcg64Mcg::seed_from_u64(mix)
}

/// A device's random generator and the engine variable that orders its users.
pub struct RngResource {
    var: Var,
    gen: Mutex<Box<dyn DeviceRng>>,
    ctx: Context,
}

impl RngResource {
    /// The variable that orders the generator's users.
    pub fn var(&self) -> &Var {
        &self.var
    }

    /// The generator, for an op holding the variable.
    pub fn lock(&self) -> parking_lot::MutexGuard<'_, Box<dyn DeviceRng>> {
        self.gen.lock()
    }
}

static GLOBAL_SEED: AtomicU64 = AtomicU64::new(0);

fn rng_table() -> &'static Mutex<HashMap<Context, &'static RngResource>> {
    static T: OnceLock<Mutex<HashMap<Context, &'static RngResource>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

fn new_generator(seed: u64, ctx: Context) -> Box<dyn DeviceRng> {
    // Host devices draw on the host; a device backend with generators of its own picks
    // them here by `ctx.dev_type`.
    Box::new(HostRng::new(seed, ctx))
}

/// The random generator of `ctx`.
pub fn rng_resource(ctx: Context) -> &'static RngResource {
    let mut t = rng_table().lock();
    t.entry(ctx).or_insert_with(|| {
        Box::leak(Box::new(RngResource {
            var: engine::get().new_variable(),
            gen: Mutex::new(new_generator(GLOBAL_SEED.load(Ordering::Relaxed), ctx)),
            ctx,
        }))
    })
}

/// Seeds the generators of every device (or of one), ordered after the random ops
/// already pushed, so a seed makes later draws reproducible.
pub fn seed(seed_value: u64, only: Option<Context>) {
    if only.is_none() {
        GLOBAL_SEED.store(seed_value, Ordering::Relaxed);
    }
    let targets: Vec<&'static RngResource> = match only {
        Some(ctx) => vec![rng_resource(ctx)],
        None => rng_table().lock().values().copied().collect(),
    };
    for r in targets {
        engine::get().push_sync(
            Box::new(move |_| {
                r.gen.lock().reseed(seed_value);
                Ok(())
            }),
            PushSpec::new("_random_seed", r.ctx, &[], std::slice::from_ref(&r.var)),
        );
    }
}

/// Scratch memory of `bytes` bytes from `ctx`'s pool for one kernel run; its contents
/// are unspecified. The pool keeps freed blocks, so a training loop reuses the same pages.
pub fn temp_space(op: &str, ctx: Context, bytes: usize) -> Result<Block> {
    storage::alloc(ctx, bytes).map_err(|e| match e {
        Error::OutOfMemory(m) => Error::OutOfMemory(format!("{op}: temporary space: {m}")),
        other => other,
    })
}

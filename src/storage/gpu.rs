//! The GPU memory pool: device memory from the driver (plain `cuMemAlloc`, never managed
//! memory) in MXNet's GPU pool types and rounding, keeping a reserve of the device free.
//! A block freed here may be reused at once, so blocks are returned only after the engine
//! has finished every op on them.

use super::{PoolKind, Pooled, Source};
use crate::context::Context;
use crate::cu;
use crate::cuda::driver::{CuDevicePtr, Driver, Handle};
use crate::engine::env_var;
use std::ptr::NonNull;

/// MXNet's GPU pool settings, from `MXNET_GPU_MEM_*` (or `RSMX_GPU_MEM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rounding {
    /// `Naive` rounds small sizes up to whole pages of this many bytes.
    pub page: usize,
    /// `Naive` rounds sizes above this up to multiples of it.
    pub large_round: usize,
    /// `Round` uses powers of two up to 2^`linear_cutoff`, then multiples of it.
    pub linear_cutoff: u32,
    /// Percent of the device's memory kept free: pooled blocks are released first.
    pub reserve_percent: usize,
}

impl Default for Rounding {
    fn default() -> Rounding {
        Rounding {
            page: 4096,
            large_round: 2 << 20,
            linear_cutoff: 24,
            reserve_percent: 5,
        }
    }
}

impl Rounding {
    /// The settings from the environment, MXNet's defaults for what is not set.
    pub fn from_env() -> Rounding {
        let get = |name: &str, default: usize| {
            env_var(&format!("RSMX_{name}"), &format!("MXNET_{name}"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        let d = Rounding::default();
        Rounding {
            page: get("GPU_MEM_POOL_PAGE_SIZE", d.page).max(1),
            large_round: get("GPU_MEM_LARGE_ALLOC_ROUND_SIZE", d.large_round).max(1),
            linear_cutoff: get("GPU_MEM_POOL_ROUND_LINEAR_CUTOFF", d.linear_cutoff as usize).min(40)
                as u32,
            reserve_percent: get("GPU_MEM_POOL_RESERVE", d.reserve_percent).min(100),
        }
    }
}

/// A GPU's memory, through its primary context.
pub struct DeviceMemory {
    driver: &'static Driver,
    context: Handle,
    rounding: Rounding,
}

// SAFETY: the context handle is an opaque driver value usable from any thread.
unsafe impl Send for DeviceMemory {}
// SAFETY: as above.
unsafe impl Sync for DeviceMemory {}

/// A pool of one GPU's memory.
pub type GpuPool = Pooled<DeviceMemory>;

impl GpuPool {
    /// A pool for `ctx` (a GPU) through `driver`, retaining the device's primary context.
    pub fn new(
        ctx: Context,
        kind: PoolKind,
        driver: &'static Driver,
        rounding: Rounding,
    ) -> crate::error::Result<GpuPool> {
        let mut context: Handle = std::ptr::null_mut();
        // SAFETY: `context` is a writable local; the driver validates the ordinal.
        unsafe { cu!(driver, primary_ctx_retain(&mut context, ctx.dev_id)) }?;
        let memory = DeviceMemory {
            driver,
            context,
            rounding,
        };
        Ok(Pooled::over(ctx, kind, memory))
    }
}

impl Source for DeviceMemory {
    fn alloc(&self, bucket: usize) -> Option<NonNull<u8>> {
        let mut p: CuDevicePtr = 0;
        // SAFETY: the context was retained for this device; `p` is a writable local.
        let r = unsafe {
            cu!(self.driver, ctx_set_current(self.context))
                .and_then(|_| cu!(self.driver, mem_alloc(&mut p, bucket)))
        };
        crate::cuda::runtime::count_alloc(false);
        r.ok().and_then(|_| NonNull::new(p as *mut u8))
    }

    fn free(&self, ptr: NonNull<u8>, _bucket: usize) {
        // A failed free leaves the block to the driver, which frees it with the context.
        crate::cuda::runtime::count_alloc(true);
        // SAFETY: `ptr` came from `alloc` on this device and is freed once.
        let _ = unsafe {
            cu!(self.driver, ctx_set_current(self.context))
                .and_then(|_| cu!(self.driver, mem_free(ptr.as_ptr() as CuDevicePtr)))
        };
    }

    fn bucket_of(&self, kind: PoolKind, size: usize) -> usize {
        let r = &self.rounding;
        match kind {
            PoolKind::Naive | PoolKind::Unpooled if size > r.large_round => {
                size.div_ceil(r.large_round) * r.large_round
            }
            PoolKind::Naive | PoolKind::Unpooled => size.div_ceil(r.page) * r.page,
            PoolKind::Round if size <= 1 << r.linear_cutoff => size.next_power_of_two(),
            PoolKind::Round => size.div_ceil(1 << r.linear_cutoff) << r.linear_cutoff,
        }
    }

    fn needs_room(&self, bucket: usize) -> bool {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writable locals; the context was retained for this device.
        let known = unsafe {
            cu!(self.driver, ctx_set_current(self.context))
                .and_then(|_| cu!(self.driver, mem_get_info(&mut free, &mut total)))
        };
        known.is_ok() && free.saturating_sub(bucket) < total / 100 * self.rounding.reserve_percent
    }
}

#[cfg(test)]
mod tests;

//! Launching a CUDA kernel from a GPU kernel function: the argument array
//! `cuLaunchKernel` takes, the launch shape for a grid-stride loop, and the dtype suffix
//! of kernel names.

use crate::cu;
use crate::cuda::runtime::{self, for_context};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::OpContext;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::ffi::c_void;

/// Threads per block of the element-wise kernels.
pub const BLOCK: u32 = 256;
/// Blocks per multiprocessor a grid-stride launch asks for at most.
const BLOCKS_PER_SM: u32 = 16;

/// A kernel's arguments, each kept in 8-byte-aligned words until the launch.
#[derive(Default)]
pub struct Args {
    words: SmallVec<[u64; 16]>,
    offsets: SmallVec<[usize; 12]>,
}

impl Args {
    pub fn new() -> Args {
        Args::default()
    }

    /// Appends one argument, passed by value as the kernel declares it.
    pub fn arg<T: Copy + 'static>(mut self, value: T) -> Args {
        debug_assert!(std::mem::align_of::<T>() <= 8);
        let size = std::mem::size_of::<T>();
        let at = self.words.len();
        self.words.resize(at + size.div_ceil(8).max(1), 0);
        // SAFETY: the words from `at` hold at least `size` bytes and are 8-byte aligned,
        // enough for `T`; `value` is plain data (`Copy`).
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&value as *const T).cast::<u8>(),
                self.words.as_mut_ptr().add(at).cast::<u8>(),
                size,
            )
        };
        self.offsets.push(at);
        self
    }

    /// Appends a device pointer.
    pub fn ptr(self, p: *const u8) -> Args {
        self.arg(p as u64)
    }
}

thread_local! {
    /// Kernel names already made from a prefix and a suffix, by the two strings' addresses.
    static NAMES: RefCell<FxHashMap<(usize, usize), &'static str>> = RefCell::default();
}

/// `prefix_suffix` (`binary_f32`), made once per thread and pair: kernels are looked up on
/// every launch, and formatting the name each time is a measurable part of a tiny op.
pub fn kernel_name(prefix: &'static str, suffix: &'static str) -> &'static str {
    let key = (prefix.as_ptr() as usize, suffix.as_ptr() as usize);
    NAMES.with(|names| {
        *names
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| Box::leak(format!("{prefix}_{suffix}").into_boxed_str()))
    })
}

/// The suffix of a kernel's name for `dtype` (`fill_f32`), or an error naming `op`.
pub fn suffix(op: &str, dtype: DType) -> Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::I32 => "i32",
        DType::I64 => "i64",
        other => {
            return Err(Error::Type(format!(
                "{op}: no GPU kernel for dtype {other}"
            )))
        }
    })
}

/// The suffix for a floating-point `dtype`.
pub fn float_suffix(op: &str, dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::F32 | DType::F64 | DType::F16 => suffix(op, dtype),
        other => Err(Error::Type(format!(
            "{op}: no GPU kernel for dtype {other} (floating point only)"
        ))),
    }
}

/// Launches `module`'s `kernel` on the op's stream with `n` items spread over a
/// grid-stride loop; nothing for `n == 0`.
pub fn launch_n(ctx: &OpContext, module: &str, kernel: &str, n: usize, args: Args) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let (rt, dev) = for_context(ctx.device)?;
    let blocks = n.div_ceil(BLOCK as usize);
    let cap = (dev.sm_count() * BLOCKS_PER_SM) as usize;
    launch(
        ctx,
        module,
        kernel,
        blocks.min(cap) as u32,
        BLOCK,
        args,
        rt,
        dev,
    )
}

#[allow(clippy::too_many_arguments)]
fn launch(
    ctx: &OpContext,
    module: &str,
    kernel: &str,
    grid: u32,
    block: u32,
    mut args: Args,
    rt: &'static runtime::Runtime,
    dev: &'static runtime::Device,
) -> Result<()> {
    let stream = ctx.stream.ok_or_else(|| {
        Error::Runtime(format!(
            "{kernel}: a GPU kernel ran outside a GPU op (no stream)"
        ))
    })?;
    let f = dev.function(rt.driver, module, kernel)?;
    let base = args.words.as_mut_ptr();
    let mut params: SmallVec<[*mut c_void; 12]> = args
        .offsets
        .iter()
        // SAFETY: each offset is inside `words`, which outlives the launch call.
        .map(|&o| unsafe { base.add(o) }.cast::<c_void>())
        .collect();
    runtime::count_launch();
    // SAFETY: `f` is a loaded kernel whose parameters are, in order, the values packed in
    // `args` (the caller matches the kernel's declaration); the driver copies them
    // before returning; `stream` is the op's live stream on this device.
    unsafe {
        cu!(
            rt.driver,
            launch_kernel(
                f,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                stream.as_raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut()
            )
        )
    }
    .map_err(|e| Error::Runtime(format!("{kernel} on {}: {e}", ctx.device)))
}

//! cuBLAS, through a table of the entry points rsmx calls (resolved by `rsmx.cuda` from the
//! loaded library, or the fake's on the host): one handle per thread and device, bound to
//! that thread's stream, and row-major GEMMs built on cuBLAS's column-major ones.

use super::driver::Handle;
use super::runtime::Device;
use crate::dtype::DType;
use crate::engine::StreamHandle;
use crate::error::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;

/// A cuBLAS status (`cublasStatus_t`); 0 is success.
pub type Status = i32;

/// `CUBLAS_OP_N` / `CUBLAS_OP_T`.
pub const OP_N: i32 = 0;
pub const OP_T: i32 = 1;
/// `CUBLAS_DEFAULT_MATH` and `CUBLAS_TF32_TENSOR_OP_MATH`.
pub const DEFAULT_MATH: i32 = 0;
pub const TF32_MATH: i32 = 3;
/// `CUDA_R_16F`, `CUDA_R_32F`.
pub const R_16F: i32 = 2;
pub const R_32F: i32 = 0;
/// `CUBLAS_COMPUTE_32F`.
pub const COMPUTE_32F: i32 = 68;
/// `CUBLAS_GEMM_DEFAULT`.
pub const GEMM_DEFAULT: i32 = -1;

type Gemm<T> = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const T,
    *const T,
    i32,
    *const T,
    i32,
    *const T,
    *mut T,
    i32,
) -> Status;
type GemmEx = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const c_void,
    *const c_void,
    i32,
    i32,
    *const c_void,
    i32,
    i32,
    *const c_void,
    *mut c_void,
    i32,
    i32,
    i32,
    i32,
) -> Status;
type GemmBatched<T> = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const T,
    *const T,
    i32,
    i64,
    *const T,
    i32,
    i64,
    *const T,
    *mut T,
    i32,
    i64,
    i32,
) -> Status;
type GemmBatchedEx = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const c_void,
    *const c_void,
    i32,
    i32,
    i64,
    *const c_void,
    i32,
    i32,
    i64,
    *const c_void,
    *mut c_void,
    i32,
    i32,
    i64,
    i32,
    i32,
    i32,
) -> Status;

/// The cuBLAS entry points.
#[derive(Clone, Copy)]
pub struct Blas {
    pub create: unsafe extern "C" fn(*mut Handle) -> Status,
    pub set_stream: unsafe extern "C" fn(Handle, Handle) -> Status,
    pub set_math_mode: unsafe extern "C" fn(Handle, i32) -> Status,
    pub sgemm: Gemm<f32>,
    pub dgemm: Gemm<f64>,
    pub gemm_ex: GemmEx,
    pub sgemm_batched: GemmBatched<f32>,
    pub dgemm_batched: GemmBatched<f64>,
    pub gemm_batched_ex: GemmBatchedEx,
}

/// The cuBLAS symbols the table needs, in field order.
pub const SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasSetStream_v2",
    "cublasSetMathMode",
    "cublasSgemm_v2",
    "cublasDgemm_v2",
    "cublasGemmEx",
    "cublasSgemmStridedBatched",
    "cublasDgemmStridedBatched",
    "cublasGemmStridedBatchedEx",
];

/// The function at `addr`, typed as `F` (a function pointer).
///
/// # Safety
/// `addr` must be a function with `F`'s signature.
unsafe fn fn_at<F: Copy>(addr: usize) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    // SAFETY: same size (checked); the caller vouches for the signature.
    unsafe { std::mem::transmute_copy(&addr) }
}

impl Blas {
    /// The table from the address of every symbol in [`SYMBOLS`].
    ///
    /// # Safety
    /// Each address must be cuBLAS's function of that name (cuBLAS 12 or 13 ABI).
    pub unsafe fn from_symbols(addresses: &HashMap<String, usize>) -> Result<Blas> {
        let missing: Vec<&str> = SYMBOLS
            .iter()
            .copied()
            .filter(|s| addresses.get(*s).is_none_or(|&a| a == 0))
            .collect();
        if !missing.is_empty() {
            return Err(Error::Runtime(format!(
                "cuBLAS lacks {}",
                missing.join(", ")
            )));
        }
        let at = |name: &str| addresses[name];
        // SAFETY: the caller vouches for each address and its signature; none is 0.
        unsafe {
            Ok(Blas {
                create: fn_at(at("cublasCreate_v2")),
                set_stream: fn_at(at("cublasSetStream_v2")),
                set_math_mode: fn_at(at("cublasSetMathMode")),
                sgemm: fn_at(at("cublasSgemm_v2")),
                dgemm: fn_at(at("cublasDgemm_v2")),
                gemm_ex: fn_at(at("cublasGemmEx")),
                sgemm_batched: fn_at(at("cublasSgemmStridedBatched")),
                dgemm_batched: fn_at(at("cublasDgemmStridedBatched")),
                gemm_batched_ex: fn_at(at("cublasGemmStridedBatchedEx")),
            })
        }
    }

    fn check(call: &str, status: Status) -> Result<()> {
        if status == 0 {
            Ok(())
        } else {
            Err(Error::cuda(
                call,
                status,
                &format!("cuBLAS status {status}"),
            ))
        }
    }
}

thread_local! {
    /// This thread's cuBLAS handle per device ordinal.
    static HANDLES: RefCell<Vec<Option<usize>>> = const { RefCell::new(Vec::new()) };
}

/// The math mode: TF32 only when `RSMX_CUDA_ALLOW_TF32=1`, so float32 products keep
/// float32 precision as in MXNet 1.x.
fn math_mode() -> i32 {
    match std::env::var("RSMX_CUDA_ALLOW_TF32").as_deref() {
        Ok("1") => TF32_MATH,
        _ => DEFAULT_MATH,
    }
}

/// The calling thread's handle on `dev`, bound to `stream` (the thread's stream there).
fn handle(blas: &Blas, dev: &Device, stream: StreamHandle) -> Result<Handle> {
    let idx = dev.ordinal() as usize;
    if let Some(h) = HANDLES.with(|h| h.borrow().get(idx).copied().flatten()) {
        return Ok(h as Handle);
    }
    let mut h: Handle = std::ptr::null_mut();
    // SAFETY: the device's context is current on this thread (the running GPU op made it
    // so); `h` is writable; the stream is this thread's live stream on the device.
    unsafe {
        Blas::check("cublasCreate_v2", (blas.create)(&mut h))?;
        Blas::check("cublasSetStream_v2", (blas.set_stream)(h, stream.as_raw()))?;
        Blas::check("cublasSetMathMode", (blas.set_math_mode)(h, math_mode()))?;
    }
    HANDLES.with(|v| {
        let mut v = v.borrow_mut();
        if v.len() <= idx {
            v.resize(idx + 1, None);
        }
        v[idx] = Some(h as usize);
    });
    Ok(h)
}

/// A row-major product `c (m×n) = alpha · op(a) · op(b) + beta · c`, `op(a)` m×k and
/// `op(b)` k×n; `lda`, `ldb`, `ldc` are the row lengths of the stored matrices, and
/// `batch` products follow each other `stride_*` elements apart.
#[derive(Debug, Clone, Copy)]
pub struct RowMajorGemm {
    pub ta: bool,
    pub tb: bool,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub batch: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
}

fn dim(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Value(format!("{what} {v} is too large for cuBLAS")))
}

/// Runs `g` on the GPU op's stream: cuBLAS sees the column-major transpose,
/// `cᵀ = op(b)ᵀ · op(a)ᵀ`, so the operands swap places.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    blas: &Blas,
    dev: &Device,
    stream: StreamHandle,
    dtype: DType,
    g: &RowMajorGemm,
    (alpha, beta): (f64, f64),
    a: *const u8,
    b: *const u8,
    c: *mut u8,
) -> Result<()> {
    if g.m == 0 || g.n == 0 || g.batch == 0 {
        return Ok(());
    }
    let h = handle(blas, dev, stream)?;
    let op = |t: bool| if t { OP_T } else { OP_N };
    let (opb, opa) = (op(g.tb), op(g.ta));
    let (m, n, k) = (dim("n", g.n)?, dim("m", g.m)?, dim("k", g.k)?);
    let (ldb, lda, ldc) = (
        dim("ldb", g.ldb.max(1))?,
        dim("lda", g.lda.max(1))?,
        dim("ldc", g.ldc.max(1))?,
    );
    let batched = g.batch > 1;
    let (sb, sa, sc) = (g.stride_b as i64, g.stride_a as i64, g.stride_c as i64);
    let count = dim("batch", g.batch)?;
    // SAFETY: `a`, `b` and `c` are device memory of the op's arrays holding the strided
    // matrices described by `g` (the caller's shapes); the handle is bound to the
    // stream the op enqueues on; scalars live on the host for the call.
    let status = unsafe {
        match dtype {
            DType::F32 => {
                let (al, be) = (alpha as f32, beta as f32);
                if batched {
                    (blas.sgemm_batched)(
                        h,
                        opb,
                        opa,
                        m,
                        n,
                        k,
                        &al,
                        b.cast(),
                        ldb,
                        sb,
                        a.cast(),
                        lda,
                        sa,
                        &be,
                        c.cast(),
                        ldc,
                        sc,
                        count,
                    )
                } else {
                    (blas.sgemm)(
                        h,
                        opb,
                        opa,
                        m,
                        n,
                        k,
                        &al,
                        b.cast(),
                        ldb,
                        a.cast(),
                        lda,
                        &be,
                        c.cast(),
                        ldc,
                    )
                }
            }
            DType::F64 => {
                if batched {
                    (blas.dgemm_batched)(
                        h,
                        opb,
                        opa,
                        m,
                        n,
                        k,
                        &alpha,
                        b.cast(),
                        ldb,
                        sb,
                        a.cast(),
                        lda,
                        sa,
                        &beta,
                        c.cast(),
                        ldc,
                        sc,
                        count,
                    )
                } else {
                    (blas.dgemm)(
                        h,
                        opb,
                        opa,
                        m,
                        n,
                        k,
                        &alpha,
                        b.cast(),
                        ldb,
                        a.cast(),
                        lda,
                        &beta,
                        c.cast(),
                        ldc,
                    )
                }
            }
            DType::F16 => {
                let (al, be) = (alpha as f32, beta as f32);
                let (al, be) = ((&al as *const f32).cast(), (&be as *const f32).cast());
                if batched {
                    (blas.gemm_batched_ex)(
                        h,
                        opb,
                        opa,
                        m,
                        n,
                        k,
                        al,
                        b.cast(),
                        R_16F,
                        ldb,
                        sb,
                        a.cast(),
                        R_16F,
                        lda,
                        sa,
                        be,
                        c.cast(),
                        R_16F,
                        ldc,
                        sc,
                        count,
                        COMPUTE_32F,
                        GEMM_DEFAULT,
                    )
                } else {
                    (blas.gemm_ex)(
                        h,
                        opb,
                        opa,
                        m,
                        n,
                        k,
                        al,
                        b.cast(),
                        R_16F,
                        ldb,
                        a.cast(),
                        R_16F,
                        lda,
                        be,
                        c.cast(),
                        R_16F,
                        ldc,
                        COMPUTE_32F,
                        GEMM_DEFAULT,
                    )
                }
            }
            other => {
                return Err(Error::Type(format!(
                    "matrix products on the GPU take float32, float64 or float16, not {other}"
                )))
            }
        }
    };
    super::runtime::count_launch();
    Blas::check(
        if batched {
            "cublasGemmStridedBatched"
        } else {
            "cublasGemm"
        },
        status,
    )
}

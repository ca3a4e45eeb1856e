//! A cuBLAS on the fake GPU: the same entry points, each queuing its product on the
//! handle's stream and computing it on the host with the CPU's GEMM.

use super::enqueue;
use crate::cuda::blas::{Blas, Status, OP_T, R_16F};
use crate::cuda::driver::Handle;
use half::f16;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

const INVALID_VALUE: Status = 7;
const NOT_SUPPORTED: Status = 15;

/// A fake handle: the stream its products go to.
struct FakeHandle {
    stream: AtomicUsize,
}

/// The fake cuBLAS table.
pub fn blas() -> Blas {
    Blas {
        create,
        set_stream,
        set_math_mode,
        sgemm,
        dgemm,
        gemm_ex,
        sgemm_batched,
        dgemm_batched,
        gemm_batched_ex,
    }
}

unsafe extern "C" fn create(out: *mut Handle) -> Status {
    let h = Box::new(FakeHandle {
        stream: AtomicUsize::new(0),
    });
    // SAFETY: the caller passes a writable pointer; the handle lives for the process.
    unsafe { *out = Box::into_raw(h).cast() };
    0
}

unsafe extern "C" fn set_stream(h: Handle, stream: Handle) -> Status {
    // SAFETY: `h` came from `create`.
    unsafe { &*(h as *const FakeHandle) }
        .stream
        .store(stream as usize, Ordering::Release);
    0
}

unsafe extern "C" fn set_math_mode(_: Handle, _: i32) -> Status {
    0
}

/// One column-major product as cuBLAS defines it, on host memory; addresses as integers.
#[derive(Clone, Copy)]
struct Product {
    ta: bool,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    a: usize,
    lda: usize,
    b: usize,
    ldb: usize,
    c: usize,
    ldc: usize,
}

/// Scalar types the fake computes in.
trait Elem: Copy + Send + 'static {
    const ZERO: Self;
    fn mul(self, o: Self) -> Self;
}
impl Elem for f32 {
    const ZERO: f32 = 0.0;
    fn mul(self, o: f32) -> f32 {
        self * o
    }
}
impl Elem for f64 {
    const ZERO: f64 = 0.0;
    fn mul(self, o: f64) -> f64 {
        self * o
    }
}
impl Elem for f16 {
    const ZERO: f16 = f16::ZERO;
    fn mul(self, o: f16) -> f16 {
        self * o
    }
}

/// `c = alpha · op(a) · op(b) + beta · c`.
///
/// # Safety
/// The addresses must hold the matrices `p` describes, with `c` not overlapping the others.
unsafe fn run<T: Elem>(p: Product, alpha: T, beta: T, zero_beta: bool) {
    let c = p.c as *mut T;
    if p.k == 0 {
        for j in 0..p.n {
            for i in 0..p.m {
                // SAFETY: (i, j) lies inside c's m×n, ldc-strided extent.
                unsafe {
                    let at = c.add(i + j * p.ldc);
                    *at = if zero_beta { T::ZERO } else { (*at).mul(beta) };
                }
            }
        }
        return;
    }
    let (lhs_rs, lhs_cs) = if p.ta { (p.lda, 1) } else { (1, p.lda) };
    let (rhs_rs, rhs_cs) = if p.tb { (p.ldb, 1) } else { (1, p.ldb) };
    // SAFETY: the caller vouches for the extents; gemm computes dst := a·dst + b·lhs·rhs,
    // reading dst only when asked.
    unsafe {
        gemm::gemm(
            p.m,
            p.n,
            p.k,
            c,
            p.ldc as isize,
            1,
            !zero_beta,
            p.a as *const T,
            lhs_cs as isize,
            lhs_rs as isize,
            p.b as *const T,
            rhs_cs as isize,
            rhs_rs as isize,
            beta,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(rayon::current_num_threads()),
        )
    }
}

/// Queues `batch` products, `strides` elements apart, on the handle's stream.
///
/// # Safety
/// As for [`run`], for every product of the batch, until the stream runs it.
unsafe fn queue<T: Elem>(
    h: Handle,
    p: Product,
    batch: usize,
    strides: [usize; 3],
    alpha: T,
    beta: T,
    zero_beta: bool,
) -> Status {
    // SAFETY: `h` came from `create`.
    let stream = unsafe { &*(h as *const FakeHandle) }
        .stream
        .load(Ordering::Acquire);
    let size = std::mem::size_of::<T>();
    let job = move || {
        for i in 0..batch {
            let q = Product {
                a: p.a + i * strides[0] * size,
                b: p.b + i * strides[1] * size,
                c: p.c + i * strides[2] * size,
                ..p
            };
            // SAFETY: the caller's stream order keeps the memory alive and unaliased.
            unsafe { run(q, alpha, beta, zero_beta) };
        }
    };
    // SAFETY: the handle's stream was set by the caller to a live fake stream.
    match unsafe { enqueue(stream as Handle, job) } {
        0 => 0,
        _ => INVALID_VALUE,
    }
}

#[allow(clippy::too_many_arguments)]
fn product(
    opa: i32,
    opb: i32,
    m: i32,
    n: i32,
    k: i32,
    a: usize,
    lda: i32,
    b: usize,
    ldb: i32,
    c: usize,
    ldc: i32,
) -> Option<Product> {
    let u = |v: i32| usize::try_from(v).ok();
    Some(Product {
        ta: opa == OP_T,
        tb: opb == OP_T,
        m: u(m)?,
        n: u(n)?,
        k: u(k)?,
        a,
        lda: u(lda)?,
        b,
        ldb: u(ldb)?,
        c,
        ldc: u(ldc)?,
    })
}

macro_rules! fake_gemm {
    ($name:ident, $batched:ident, $T:ty) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(
            h: Handle,
            opa: i32,
            opb: i32,
            m: i32,
            n: i32,
            k: i32,
            alpha: *const $T,
            a: *const $T,
            lda: i32,
            b: *const $T,
            ldb: i32,
            beta: *const $T,
            c: *mut $T,
            ldc: i32,
        ) -> Status {
            let Some(p) = product(
                opa, opb, m, n, k, a as usize, lda, b as usize, ldb, c as usize, ldc,
            ) else {
                return INVALID_VALUE;
            };
            // SAFETY: cuBLAS's contract: host scalars, device (here host) matrices.
            unsafe { queue(h, p, 1, [0; 3], *alpha, *beta, *beta == 0.0) }
        }

        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $batched(
            h: Handle,
            opa: i32,
            opb: i32,
            m: i32,
            n: i32,
            k: i32,
            alpha: *const $T,
            a: *const $T,
            lda: i32,
            sa: i64,
            b: *const $T,
            ldb: i32,
            sb: i64,
            beta: *const $T,
            c: *mut $T,
            ldc: i32,
            sc: i64,
            count: i32,
        ) -> Status {
            let Some(p) = product(
                opa, opb, m, n, k, a as usize, lda, b as usize, ldb, c as usize, ldc,
            ) else {
                return INVALID_VALUE;
            };
            let strides = [sa as usize, sb as usize, sc as usize];
            // SAFETY: as for the single product, for each of the batch.
            unsafe {
                queue(
                    h,
                    p,
                    count.max(0) as usize,
                    strides,
                    *alpha,
                    *beta,
                    *beta == 0.0,
                )
            }
        }
    };
}

fake_gemm!(sgemm, sgemm_batched, f32);
fake_gemm!(dgemm, dgemm_batched, f64);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn gemm_ex(
    h: Handle,
    opa: i32,
    opb: i32,
    m: i32,
    n: i32,
    k: i32,
    alpha: *const c_void,
    a: *const c_void,
    at: i32,
    lda: i32,
    b: *const c_void,
    bt: i32,
    ldb: i32,
    beta: *const c_void,
    c: *mut c_void,
    ct: i32,
    ldc: i32,
    _compute: i32,
    _algo: i32,
) -> Status {
    // SAFETY: forwarded; a single product is a batch of one.
    unsafe {
        gemm_batched_ex(
            h, opa, opb, m, n, k, alpha, a, at, lda, 0, b, bt, ldb, 0, beta, c, ct, ldc, 0, 1,
            _compute, _algo,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn gemm_batched_ex(
    h: Handle,
    opa: i32,
    opb: i32,
    m: i32,
    n: i32,
    k: i32,
    alpha: *const c_void,
    a: *const c_void,
    at: i32,
    lda: i32,
    sa: i64,
    b: *const c_void,
    bt: i32,
    ldb: i32,
    sb: i64,
    beta: *const c_void,
    c: *mut c_void,
    ct: i32,
    ldc: i32,
    sc: i64,
    count: i32,
    _compute: i32,
    _algo: i32,
) -> Status {
    if [at, bt, ct] != [R_16F; 3] {
        return NOT_SUPPORTED;
    }
    let Some(p) = product(
        opa, opb, m, n, k, a as usize, lda, b as usize, ldb, c as usize, ldc,
    ) else {
        return INVALID_VALUE;
    };
    // SAFETY: float32 host scalars with float16 matrices, as rsmx calls it.
    let (al, be) = unsafe { (*(alpha as *const f32), *(beta as *const f32)) };
    let strides = [sa as usize, sb as usize, sc as usize];
    // SAFETY: as for the other products.
    unsafe {
        queue(
            h,
            p,
            count.max(0) as usize,
            strides,
            f16::from_f32(al),
            f16::from_f32(be),
            be == 0.0,
        )
    }
}

//! Single-matrix LAPACK-style kernels and backward formulas of MXNet 1.9.1's `linalg` operators.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// Element type of every routine in this module; implemented for `f32` and `f64`.
///
/// All arithmetic is carried out in the element type itself, as LAPACK's
/// `s*` / `d*` routines do.
pub trait LaFloat:
    Copy
    + Debug
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + 'static
{
    /// The value `0`.
    const ZERO: Self;
    /// The value `1`.
    const ONE: Self;
    /// The value `0.5`.
    const HALF: Self;
    /// Machine epsilon (distance from 1 to the next larger value).
    const EPSILON: Self;
    /// Smallest positive normal value.
    const MIN_POSITIVE: Self;
    /// Negative infinity.
    const NEG_INFINITY: Self;
    /// A quiet NaN.
    const NAN: Self;
    /// Lower clamp for eigenvalue gaps in `syevd_backward` (MXNet: 1e-30 for f32, 1e-100 for f64).
    const SYEVD_BACK_EPS: Self;
    /// LAPACK routine prefix used in error messages (`"s"` or `"d"`).
    const LAPACK_PREFIX: &'static str;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Exponential function.
    fn exp(self) -> Self;
    /// `sqrt(self^2 + other^2)` without undue overflow.
    fn hypot(self, other: Self) -> Self;
    /// Fused multiply-add `self * a + b` with a single rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
    /// Whether the sign bit is set (true for `-0.0`).
    fn is_sign_negative(self) -> bool;
    /// Conversion from `f64` (rounding for `f32`).
    fn from_f64(v: f64) -> Self;
    /// Conversion to `f64`.
    fn to_f64(self) -> f64;
}

macro_rules! impl_la_float {
    ($t:ident, $prefix:expr, $back_eps:expr) => {
        impl LaFloat for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const HALF: Self = 0.5;
            const EPSILON: Self = $t::EPSILON;
            const MIN_POSITIVE: Self = $t::MIN_POSITIVE;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            const NAN: Self = $t::NAN;
            const SYEVD_BACK_EPS: Self = $back_eps;
            const LAPACK_PREFIX: &'static str = $prefix;
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            fn abs(self) -> Self {
                $t::abs(self)
            }
            fn ln(self) -> Self {
                $t::ln(self)
            }
            fn exp(self) -> Self {
                $t::exp(self)
            }
            fn hypot(self, other: Self) -> Self {
                $t::hypot(self, other)
            }
            fn mul_add(self, a: Self, b: Self) -> Self {
                $t::mul_add(self, a, b)
            }
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            fn is_sign_negative(self) -> bool {
                $t::is_sign_negative(self)
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
        }
    };
}

impl_la_float!(f32, "s", 1e-30);
impl_la_float!(f64, "d", 1e-100);

// ---------------------------------------------------------------------------
// Small private helpers
// ---------------------------------------------------------------------------

fn area(op: &str, rows: usize, cols: usize) -> Result<usize, String> {
    rows.checked_mul(cols)
        .ok_or_else(|| format!("{op}: matrix size {rows}x{cols} overflows usize"))
}

fn check_len<T>(op: &str, name: &str, s: &[T], want: usize) -> Result<(), String> {
    if s.len() == want {
        Ok(())
    } else {
        Err(format!(
            "{op}: `{name}` has {} elements, expected {want}",
            s.len()
        ))
    }
}

fn lapack_failure(info: usize, msg: &str) -> String {
    format!("Check failed: ret == 0 ({info} vs. 0) : {msg}")
}

fn dot<T: LaFloat>(a: &[T], b: &[T]) -> T {
    a.iter().zip(b).fold(T::ZERO, |s, (&x, &y)| s + x * y)
}

/// Element (i, j) of op(T), where T is the `lower` (or upper) triangle of the
/// k×k row-major matrix `a` and op is the identity or the transpose.
#[inline]
fn tri_at<T: LaFloat>(a: &[T], k: usize, lower: bool, transpose: bool, i: usize, j: usize) -> T {
    let (r, c) = if transpose { (j, i) } else { (i, j) };
    if (lower && r >= c) || (!lower && r <= c) {
        a[r * k + c]
    } else {
        T::ZERO
    }
}

/// `out (r×c) = alpha * op(A) * op(B) + beta * out`, op(A) r×k, op(B) k×c.
/// `beta == 0` overwrites `out` without reading it.
#[allow(clippy::too_many_arguments)]
fn gemm<T: LaFloat>(
    r: usize,
    c: usize,
    k: usize,
    alpha: T,
    a: &[T],
    ta: bool,
    b: &[T],
    tb: bool,
    beta: T,
    out: &mut [T],
) {
    for i in 0..r {
        for j in 0..c {
            let mut s = T::ZERO;
            for p in 0..k {
                let x = if ta { a[p * r + i] } else { a[i * k + p] };
                let y = if tb { b[j * k + p] } else { b[p * c + j] };
                s += x * y;
            }
            let v = alpha * s;
            let o = &mut out[i * c + j];
            *o = if beta == T::ZERO { v } else { v + beta * *o };
        }
    }
}

/// Mirrors one strict triangle of the n×n matrix onto the other
/// (`to_lower`: upper → lower, i.e. copyUTL; otherwise lower → upper, copyLTU).
fn copy_triangle_to_opposite<T: LaFloat>(x: &mut [T], n: usize, to_lower: bool) {
    for i in 0..n {
        for j in 0..i {
            if to_lower {
                x[i * n + j] = x[j * n + i];
            } else {
                x[j * n + i] = x[i * n + j];
            }
        }
    }
}

/// Zeroes the strict lower (`zero_lower`) or strict upper triangle.
fn zero_triangle<T: LaFloat>(x: &mut [T], n: usize, zero_lower: bool) {
    if n == 0 {
        return;
    }
    for (i, row) in x.chunks_exact_mut(n).enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            if (zero_lower && i > j) || (!zero_lower && i < j) {
                *v = T::ZERO;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn trsm_impl<T: LaFloat>(
    a: &[T],
    b: &mut [T],
    m: usize,
    n: usize,
    transpose: bool,
    rightside: bool,
    lower: bool,
    alpha: T,
) {
    if m == 0 || n == 0 {
        return;
    }
    if alpha == T::ZERO {
        b.fill(T::ZERO);
        return;
    }
    if alpha != T::ONE {
        for x in b.iter_mut() {
            *x *= alpha;
        }
    }
    let k = if rightside { n } else { m };
    let op = |i: usize, j: usize| tri_at(a, k, lower, transpose, i, j);
    let op_lower = lower != transpose;
    if !rightside {
        // op(T) X = B: rows of X are obtained by forward/backward substitution.
        if op_lower {
            for i in 0..m {
                let (done, rest) = b.split_at_mut(i * n);
                let row = &mut rest[..n];
                for (p, src) in done.chunks_exact(n).enumerate() {
                    let f = op(i, p);
                    for (x, &y) in row.iter_mut().zip(src) {
                        *x -= f * y;
                    }
                }
                let inv = T::ONE / op(i, i);
                for x in row.iter_mut() {
                    *x *= inv;
                }
            }
        } else {
            for i in (0..m).rev() {
                let (head, tail) = b.split_at_mut((i + 1) * n);
                let row = &mut head[i * n..];
                for (q, src) in tail.chunks_exact(n).enumerate() {
                    let f = op(i, i + 1 + q);
                    for (x, &y) in row.iter_mut().zip(src) {
                        *x -= f * y;
                    }
                }
                let inv = T::ONE / op(i, i);
                for x in row.iter_mut() {
                    *x *= inv;
                }
            }
        }
    } else {
        // X op(T) = B: every row of X is solved independently.
        for row in b.chunks_exact_mut(n) {
            if op_lower {
                for j in (0..n).rev() {
                    let mut s = row[j];
                    for (p, &x) in row.iter().enumerate().skip(j + 1) {
                        s -= x * op(p, j);
                    }
                    row[j] = s * (T::ONE / op(j, j));
                }
            } else {
                for j in 0..n {
                    let mut s = row[j];
                    for (p, &x) in row.iter().enumerate().take(j) {
                        s -= x * op(p, j);
                    }
                    row[j] = s * (T::ONE / op(j, j));
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn trmm_impl<T: LaFloat>(
    a: &[T],
    b: &mut [T],
    m: usize,
    n: usize,
    transpose: bool,
    rightside: bool,
    lower: bool,
    alpha: T,
) {
    if m == 0 || n == 0 {
        return;
    }
    if alpha == T::ZERO {
        b.fill(T::ZERO);
        return;
    }
    let k = if rightside { n } else { m };
    let op = |i: usize, j: usize| tri_at(a, k, lower, transpose, i, j);
    let op_lower = lower != transpose;
    let src = b.to_vec();
    if !rightside {
        for (i, row) in b.chunks_exact_mut(n).enumerate() {
            row.fill(T::ZERO);
            let (p0, p1) = if op_lower { (0, i + 1) } else { (i, m) };
            for p in p0..p1 {
                let f = op(i, p);
                for (x, &y) in row.iter_mut().zip(&src[p * n..(p + 1) * n]) {
                    *x += f * y;
                }
            }
            for x in row.iter_mut() {
                *x *= alpha;
            }
        }
    } else {
        for (row, srow) in b.chunks_exact_mut(n).zip(src.chunks_exact(n)) {
            for (j, out) in row.iter_mut().enumerate() {
                let (p0, p1) = if op_lower { (j, n) } else { (0, j + 1) };
                let mut s = T::ZERO;
                for (p, &x) in srow.iter().enumerate().take(p1).skip(p0) {
                    s += x * op(p, j);
                }
                *out = alpha * s;
            }
        }
    }
}

fn check_tri_dims<T>(
    op: &str,
    a: &[T],
    b: &[T],
    m: usize,
    n: usize,
    rightside: bool,
) -> Result<(usize, usize), String> {
    let k = if rightside { n } else { m };
    let kk = area(op, k, k)?;
    let mn = area(op, m, n)?;
    check_len(op, "a", a, kk)?;
    check_len(op, "b", b, mn)?;
    Ok((kk, mn))
}

mod backward;
mod factor;
#[cfg(test)]
mod tests;

pub use backward::*;
pub use factor::*;

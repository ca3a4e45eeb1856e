//! The gradients of the factorizations and solves, as MXNet 1.9.1 computes them.

use super::*;

// ---------------------------------------------------------------------------
// Backward formulas (MXNet 1.9.1 la_op-inl.h)
// ---------------------------------------------------------------------------

/// Backward of `L = potrf(A)`.
///
/// `l` is the forward output (only its `lower`/upper triangle is read), `dl`
/// the head gradient; `da_out` gets MXNet's full symmetric gradient
/// `0.5 * L^-T copyLTU(L^T dL) L^-1` (lower) or
/// `0.5 * U^-1 copyUTL(dU U^T) U^-T` (upper).
pub fn potrf_backward<T: LaFloat>(
    l: &[T],
    dl: &[T],
    n: usize,
    lower: bool,
    da_out: &mut [T],
) -> Result<(), String> {
    let nn = area("potrf_backward", n, n)?;
    check_len("potrf_backward", "l", l, nn)?;
    check_len("potrf_backward", "dl", dl, nn)?;
    check_len("potrf_backward", "da_out", da_out, nn)?;
    da_out.copy_from_slice(dl);
    trmm_impl(l, da_out, n, n, true, !lower, lower, T::ONE);
    copy_triangle_to_opposite(da_out, n, !lower);
    trsm_impl(l, da_out, n, n, lower, false, lower, T::ONE);
    trsm_impl(l, da_out, n, n, !lower, true, lower, T::HALF);
    Ok(())
}

/// Backward of `A = potri(L)`.
///
/// `l` is the forward input factor, `a_out` the forward output, `da` the head
/// gradient; `dl_out` gets `-tril(A (dA + dA^T) L^-T)` (lower) or
/// `-triu(U^-T (dA + dA^T) A)` (upper), with the opposite strict triangle 0.
pub fn potri_backward<T: LaFloat>(
    l: &[T],
    a_out: &[T],
    da: &[T],
    n: usize,
    lower: bool,
    dl_out: &mut [T],
) -> Result<(), String> {
    let nn = area("potri_backward", n, n)?;
    check_len("potri_backward", "l", l, nn)?;
    check_len("potri_backward", "a_out", a_out, nn)?;
    check_len("potri_backward", "da", da, nn)?;
    check_len("potri_backward", "dl_out", dl_out, nn)?;
    if lower {
        gemm(n, n, n, T::ONE, a_out, false, da, false, T::ZERO, dl_out);
        gemm(n, n, n, T::ONE, a_out, false, da, true, T::ONE, dl_out);
    } else {
        gemm(n, n, n, T::ONE, da, false, a_out, false, T::ZERO, dl_out);
        gemm(n, n, n, T::ONE, da, true, a_out, false, T::ONE, dl_out);
    }
    trsm_impl(l, dl_out, n, n, true, lower, lower, -T::ONE);
    zero_triangle(dl_out, n, !lower);
    Ok(())
}

/// Backward of `C = trsm(A, B)` (same flags and shapes as [`trsm`]).
///
/// `c` is the forward output, `dc` the head gradient. Writes
/// `db_out = alpha * op(T)^-T dC` (or `alpha * dC op(T)^-T`) and
/// `da_out = -(1/alpha) * mask(G)` with G = `dB C^T`, `C dB^T`, `C^T dB` or
/// `dB^T C` for (left, no-transpose), (left, transpose), (right,
/// no-transpose), (right, transpose); mask keeps the `lower`/upper triangle.
#[allow(clippy::too_many_arguments)]
pub fn trsm_backward<T: LaFloat>(
    a: &[T],
    c: &[T],
    dc: &[T],
    m: usize,
    n: usize,
    transpose: bool,
    rightside: bool,
    lower: bool,
    alpha: T,
    da_out: &mut [T],
    db_out: &mut [T],
) -> Result<(), String> {
    let (kk, mn) = check_tri_dims("trsm_backward", a, c, m, n, rightside)?;
    check_len("trsm_backward", "dc", dc, mn)?;
    check_len("trsm_backward", "da_out", da_out, kk)?;
    check_len("trsm_backward", "db_out", db_out, mn)?;
    db_out.copy_from_slice(dc);
    trsm_impl(a, db_out, m, n, !transpose, rightside, lower, alpha);
    let k = if rightside { n } else { m };
    let inner = if rightside { m } else { n };
    let scale = -(T::ONE / alpha);
    if rightside == transpose {
        gemm(
            k,
            k,
            inner,
            scale,
            db_out,
            transpose,
            c,
            !transpose,
            T::ZERO,
            da_out,
        );
    } else {
        gemm(
            k,
            k,
            inner,
            scale,
            c,
            !transpose,
            db_out,
            transpose,
            T::ZERO,
            da_out,
        );
    }
    zero_triangle(da_out, k, !lower);
    Ok(())
}

/// Backward of `C = trmm(A, B)` (same flags and shapes as [`trmm`]).
///
/// Writes `da_out = alpha * mask(G)` with G = `dC B^T`, `B dC^T`, `B^T dC`
/// or `dC^T B` for (left, no-transpose), (left, transpose), (right,
/// no-transpose), (right, transpose), and `db_out = alpha * op(T)^T dC` (or
/// `alpha * dC op(T)^T`).
#[allow(clippy::too_many_arguments)]
pub fn trmm_backward<T: LaFloat>(
    a: &[T],
    b: &[T],
    dc: &[T],
    m: usize,
    n: usize,
    transpose: bool,
    rightside: bool,
    lower: bool,
    alpha: T,
    da_out: &mut [T],
    db_out: &mut [T],
) -> Result<(), String> {
    let (kk, mn) = check_tri_dims("trmm_backward", a, b, m, n, rightside)?;
    check_len("trmm_backward", "dc", dc, mn)?;
    check_len("trmm_backward", "da_out", da_out, kk)?;
    check_len("trmm_backward", "db_out", db_out, mn)?;
    let k = if rightside { n } else { m };
    let inner = if rightside { m } else { n };
    if rightside == transpose {
        gemm(
            k,
            k,
            inner,
            alpha,
            dc,
            transpose,
            b,
            !transpose,
            T::ZERO,
            da_out,
        );
    } else {
        gemm(
            k,
            k,
            inner,
            alpha,
            b,
            !transpose,
            dc,
            transpose,
            T::ZERO,
            da_out,
        );
    }
    zero_triangle(da_out, k, !lower);
    db_out.copy_from_slice(dc);
    trmm_impl(a, db_out, m, n, !transpose, rightside, lower, alpha);
    Ok(())
}

/// Backward of `(Q, L) = gelqf(A)` (A m×n, m <= n).
///
/// Head gradients `dq` (m×n) and `dl` (m×m) are both required (pass zeros
/// for an output without gradient, as autograd does). Writes
/// `da_out = L^-T (dQ + copyLTU(M) Q)`, `M = L^T dL - dQ Q^T`.
pub fn gelqf_backward<T: LaFloat>(
    q: &[T],
    l: &[T],
    dq: &[T],
    dl: &[T],
    m: usize,
    n: usize,
    da_out: &mut [T],
) -> Result<(), String> {
    let mn = area("gelqf_backward", m, n)?;
    let mm = area("gelqf_backward", m, m)?;
    check_len("gelqf_backward", "q", q, mn)?;
    check_len("gelqf_backward", "l", l, mm)?;
    check_len("gelqf_backward", "dq", dq, mn)?;
    check_len("gelqf_backward", "dl", dl, mm)?;
    check_len("gelqf_backward", "da_out", da_out, mn)?;
    da_out.copy_from_slice(dq);
    let mut tm = dl.to_vec();
    trmm_impl(l, &mut tm, m, m, true, false, true, T::ONE);
    gemm(m, m, n, -T::ONE, da_out, false, q, true, T::ONE, &mut tm);
    copy_triangle_to_opposite(&mut tm, m, false);
    gemm(m, n, m, T::ONE, &tm, false, q, false, T::ONE, da_out);
    trsm_impl(l, da_out, m, n, true, false, true, T::ONE);
    Ok(())
}

/// Backward of `(U, lam) = syevd(A)`.
///
/// With `X = dU U^T`, `Y_ij = Y_ji = (X_ij - X_ji) / (2 max(lam_i - lam_j, eps))`
/// for i > j (eps = [`LaFloat::SYEVD_BACK_EPS`]), `Y_ii = dlam_i`; writes
/// `da_out = U^T Y U` (symmetric).
pub fn syevd_backward<T: LaFloat>(
    u: &[T],
    lam: &[T],
    du: &[T],
    dlam: &[T],
    n: usize,
    da_out: &mut [T],
) -> Result<(), String> {
    let nn = area("syevd_backward", n, n)?;
    check_len("syevd_backward", "u", u, nn)?;
    check_len("syevd_backward", "lam", lam, n)?;
    check_len("syevd_backward", "du", du, nn)?;
    check_len("syevd_backward", "dlam", dlam, n)?;
    check_len("syevd_backward", "da_out", da_out, nn)?;
    let mut x = vec![T::ZERO; nn];
    gemm(n, n, n, T::ONE, du, false, u, true, T::ZERO, &mut x);
    let mut y = vec![T::ZERO; nn];
    let two = T::ONE + T::ONE;
    for i in 1..n {
        for j in 0..i {
            let mut denom = lam[i] - lam[j];
            if denom < T::SYEVD_BACK_EPS {
                denom = T::SYEVD_BACK_EPS;
            }
            denom *= two;
            let elem = (x[i * n + j] - x[j * n + i]) / denom;
            y[i * n + j] = elem;
            y[j * n + i] = elem;
        }
    }
    for i in 0..n {
        y[i * n + i] = dlam[i];
    }
    gemm(n, n, n, T::ONE, u, true, &y, false, T::ZERO, &mut x);
    gemm(n, n, n, T::ONE, &x, false, u, false, T::ZERO, da_out);
    Ok(())
}

/// Backward of `B = inverse(A)`: `da_out = -B^T dB B^T` (`b` is the forward output).
pub fn inverse_backward<T: LaFloat>(
    b: &[T],
    db: &[T],
    n: usize,
    da_out: &mut [T],
) -> Result<(), String> {
    let nn = area("inverse_backward", n, n)?;
    check_len("inverse_backward", "b", b, nn)?;
    check_len("inverse_backward", "db", db, nn)?;
    check_len("inverse_backward", "da_out", da_out, nn)?;
    let mut tmp = vec![T::ZERO; nn];
    gemm(n, n, n, T::ONE, db, false, b, true, T::ZERO, &mut tmp);
    gemm(n, n, n, -T::ONE, b, true, &tmp, false, T::ZERO, da_out);
    Ok(())
}

/// `da_out = scale * A^-T` from a fresh LU of `a` (MXNet's getri-based helper).
fn scaled_inverse_transpose<T: LaFloat>(
    a: &[T],
    n: usize,
    scale: T,
    da_out: &mut [T],
) -> Result<(), String> {
    if n == 0 {
        return Ok(());
    }
    let mut lu = a.to_vec();
    let mut ipiv = vec![0i32; n];
    getrf(&mut lu, n, &mut ipiv)?;
    let mut inv = vec![T::ZERO; lu.len()];
    getri_impl(&lu, &ipiv, n, &mut inv).map_err(getri_failure::<T>)?;
    for (i, row) in da_out.chunks_exact_mut(n).enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = scale * inv[j * n + i];
        }
    }
    Ok(())
}

/// Backward of `d = det(A)`: `da_out = (d * dd) * A^-T`, or all zeros when
/// `d == 0` (either sign), as MXNet. `det_val` is the forward output.
/// Fails only if `d != 0` but LU has a zero pivot (MXNet: getri failure).
pub fn det_backward<T: LaFloat>(
    a: &[T],
    n: usize,
    det_val: T,
    ddet: T,
    da_out: &mut [T],
) -> Result<(), String> {
    let nn = area("det_backward", n, n)?;
    check_len("det_backward", "a", a, nn)?;
    check_len("det_backward", "da_out", da_out, nn)?;
    if det_val == T::ZERO {
        da_out.fill(T::ZERO);
        return Ok(());
    }
    scaled_inverse_transpose(a, n, det_val * ddet, da_out)
}

/// Backward of `(sign, logabsdet) = slogdet(A)`: `da_out = dlogabsdet * A^-T`,
/// or all zeros when `logabsdet == -inf`. The gradient of `sign` is ignored,
/// as in MXNet.
pub fn slogdet_backward<T: LaFloat>(
    a: &[T],
    n: usize,
    logabsdet: T,
    dlogabsdet: T,
    da_out: &mut [T],
) -> Result<(), String> {
    let nn = area("slogdet_backward", n, n)?;
    check_len("slogdet_backward", "a", a, nn)?;
    check_len("slogdet_backward", "da_out", da_out, nn)?;
    if logabsdet == T::NEG_INFINITY {
        da_out.fill(T::ZERO);
        return Ok(());
    }
    scaled_inverse_transpose(a, n, dlogabsdet, da_out)
}

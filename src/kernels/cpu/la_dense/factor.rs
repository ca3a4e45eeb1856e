//! The factorizations and solves, one matrix at a time.

use super::*;

// ---------------------------------------------------------------------------
// Cholesky: potrf / potri
// ---------------------------------------------------------------------------

/// Cholesky factorization in place, as MXNet's `linalg.potrf`.
///
/// `a` is a row-major n×n matrix. With `lower == true` only its lower
/// triangle (with diagonal) is read and `a` becomes L with `A = L L^T`;
/// with `lower == false` only the upper triangle is read and `a` becomes
/// U with `A = U^T U` (U = L^T). The opposite strict triangle is set to 0
/// and the diagonal is positive.
///
/// Fails (like LAPACK `potrf`, info = order of the first non-positive
/// leading minor) when a pivot is `<= 0`, with MXNet's message
/// `Check failed: ret == 0 (k vs. 0) : dpotrf failed in lapack on cpu. ...`;
/// `a` is then partially overwritten. A NaN pivot is not an error (NaN
/// propagates), as in OpenBLAS.
pub fn potrf<T: LaFloat>(a: &mut [T], n: usize, lower: bool) -> Result<(), String> {
    let nn = area("potrf", n, n)?;
    check_len("potrf", "a", a, nn)?;
    // L(i, j) (i >= j) lives at a[idx(i, j)].
    let idx = |i: usize, j: usize| if lower { i * n + j } else { j * n + i };
    for j in 0..n {
        let mut s = T::ZERO;
        for k in 0..j {
            let v = a[idx(j, k)];
            s = v.mul_add(v, s);
        }
        let ajj = a[idx(j, j)] - s;
        if ajj <= T::ZERO {
            a[idx(j, j)] = ajj;
            return Err(lapack_failure(
                j + 1,
                &format!(
                    "{}potrf failed in lapack on cpu. This may happen when the input matrix \
                     is either not symmetric or not positive definite.",
                    T::LAPACK_PREFIX
                ),
            ));
        }
        let ajj = ajj.sqrt();
        a[idx(j, j)] = ajj;
        let inv = T::ONE / ajj;
        for i in j + 1..n {
            let mut s = T::ZERO;
            for k in 0..j {
                s = a[idx(i, k)].mul_add(a[idx(j, k)], s);
            }
            let v = &mut a[idx(i, j)];
            *v = (*v - s) * inv;
        }
    }
    zero_triangle(a, n, !lower);
    Ok(())
}

/// Inverse of `A = L L^T` (`lower`) or `A = U^T U` (`!lower`) from its
/// Cholesky factor, as MXNet's `linalg.potri`.
///
/// Only the `lower` (or upper) triangle of `l` is read. `out` receives the
/// full symmetric n×n inverse. Fails when a diagonal entry of the factor is
/// exactly zero (info = its 1-based index), with MXNet's message
/// `... dpotri failed in lapack on cpu. This may happen when the input matrix
/// is not a Cholesky factorization obtained by a prior call of the
/// potrf-operator.`
pub fn potri<T: LaFloat>(l: &[T], n: usize, lower: bool, out: &mut [T]) -> Result<(), String> {
    let nn = area("potri", n, n)?;
    check_len("potri", "l", l, nn)?;
    check_len("potri", "out", out, nn)?;
    let at = |i: usize, j: usize| l[if lower { i * n + j } else { j * n + i }];
    if let Some(j) = (0..n).find(|&j| at(j, j) == T::ZERO) {
        return Err(lapack_failure(
            j + 1,
            &format!(
                "{}potri failed in lapack on cpu. This may happen when the input matrix is not \
                 a Cholesky factorization obtained by a prior call of the potrf-operator.",
                T::LAPACK_PREFIX
            ),
        ));
    }
    // W = L^{-1} (lower triangular).
    let mut w = vec![T::ZERO; nn];
    for j in 0..n {
        w[j * n + j] = T::ONE / at(j, j);
        for i in j + 1..n {
            let mut s = T::ZERO;
            for k in j..i {
                s += at(i, k) * w[k * n + j];
            }
            w[i * n + j] = -s / at(i, i);
        }
    }
    // out = W^T W.
    for i in 0..n {
        for j in 0..=i {
            let mut s = T::ZERO;
            for k in i..n {
                s += w[k * n + i] * w[k * n + j];
            }
            out[i * n + j] = s;
            out[j * n + i] = s;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Triangular solve / multiply
// ---------------------------------------------------------------------------

/// Triangular solve in place, as MXNet's `linalg.trsm`.
///
/// `b` is row-major m×n. Let T be the `lower` (or upper) triangle of `a`
/// (the other triangle is never read; the diagonal is non-unit) and
/// `op(T) = T^T` if `transpose`, else T. Without `rightside`, `a` is m×m and
/// `b <- alpha * op(T)^{-1} * b`; with `rightside`, `a` is n×n and
/// `b <- alpha * b * op(T)^{-1}`. A zero on the diagonal is not an error:
/// the result holds inf/NaN, as in BLAS. Errors only on slice-length mismatch.
#[allow(clippy::too_many_arguments)]
pub fn trsm<T: LaFloat>(
    a: &[T],
    b: &mut [T],
    m: usize,
    n: usize,
    transpose: bool,
    rightside: bool,
    lower: bool,
    alpha: T,
) -> Result<(), String> {
    check_tri_dims("trsm", a, b, m, n, rightside)?;
    trsm_impl(a, b, m, n, transpose, rightside, lower, alpha);
    Ok(())
}

/// Triangular multiply in place, as MXNet's `linalg.trmm`.
///
/// Same conventions as [`trsm`]: `b <- alpha * op(T) * b` (a is m×m) or,
/// with `rightside`, `b <- alpha * b * op(T)` (a is n×n); only the
/// `lower` (or upper) triangle of `a` is read. Errors only on slice-length
/// mismatch.
#[allow(clippy::too_many_arguments)]
pub fn trmm<T: LaFloat>(
    a: &[T],
    b: &mut [T],
    m: usize,
    n: usize,
    transpose: bool,
    rightside: bool,
    lower: bool,
    alpha: T,
) -> Result<(), String> {
    check_tri_dims("trmm", a, b, m, n, rightside)?;
    trmm_impl(a, b, m, n, transpose, rightside, lower, alpha);
    Ok(())
}

// ---------------------------------------------------------------------------
// LU: getrf / getri / inverse / det / slogdet
// ---------------------------------------------------------------------------

/// Left-looking (Crout) LU with partial pivoting of M = A^T, M[i][k] = lu[k*n+i]
/// (the column-major view of the row-major buffer, as MXNet hands it to LAPACK).
fn getrf_impl<T: LaFloat>(lu: &mut [T], n: usize, ipiv: &mut [i32]) -> usize {
    let mut info = 0;
    for j in 0..n {
        let (prev, rest) = lu.split_at_mut(j * n);
        let col = &mut rest[..n];
        // Apply the earlier interchanges to this column.
        for (i, &p) in ipiv.iter().enumerate().take(j) {
            let ip = (p - 1) as usize;
            if ip != i {
                col.swap(i, ip);
            }
        }
        // Unit-lower forward substitution for the U part of the column.
        // Dot products accumulate with FMA, as OpenBLAS's x86-64 kernels do;
        // this decides whether a pivot of a singular matrix comes out exactly 0.
        for i in 1..j {
            let mut s = T::ZERO;
            for (k, &c) in col.iter().enumerate().take(i) {
                s = prev[k * n + i].mul_add(c, s);
            }
            col[i] -= s;
        }
        // Update of the remaining part.
        for i in j..n {
            let mut s = T::ZERO;
            for (k, &c) in col.iter().enumerate().take(j) {
                s = prev[k * n + i].mul_add(c, s);
            }
            col[i] -= s;
        }
        // Pivot: first index of the largest magnitude.
        let mut jp = j;
        let mut best = col[j].abs();
        for (i, &v) in col.iter().enumerate().skip(j + 1) {
            if v.abs() > best {
                best = v.abs();
                jp = i;
            }
        }
        ipiv[j] = (jp + 1) as i32;
        let piv = col[jp];
        if piv != T::ZERO {
            if jp != j {
                col.swap(j, jp);
                for c in 0..j {
                    prev.swap(c * n + j, c * n + jp);
                }
            }
            let inv = T::ONE / piv;
            for x in col[j + 1..].iter_mut() {
                *x *= inv;
            }
        } else if info == 0 {
            info = j + 1;
        }
    }
    info
}

/// Inverse of A from `getrf_impl`'s factors into row-major `out`; Err(info) on a zero pivot.
pub(super) fn getri_impl<T: LaFloat>(
    lu: &[T],
    ipiv: &[i32],
    n: usize,
    out: &mut [T],
) -> Result<(), usize> {
    if n == 0 {
        return Ok(());
    }
    if let Some(j) = (0..n).find(|&j| lu[j * n + j] == T::ZERO) {
        return Err(j + 1);
    }
    // Column c of M^{-1} (M = A^T) is row c of A^{-1}.
    for (c, x) in out.chunks_exact_mut(n).enumerate() {
        x.fill(T::ZERO);
        x[c] = T::ONE;
        for (i, &p) in ipiv.iter().enumerate().take(n) {
            let ip = (p - 1) as usize;
            if ip != i {
                x.swap(i, ip);
            }
        }
        for i in 1..n {
            let mut s = T::ZERO;
            for (k, &xk) in x.iter().enumerate().take(i) {
                s += lu[k * n + i] * xk;
            }
            x[i] -= s;
        }
        for i in (0..n).rev() {
            let mut s = T::ZERO;
            for (k, &xk) in x.iter().enumerate().skip(i + 1) {
                s += lu[k * n + i] * xk;
            }
            x[i] = (x[i] - s) / lu[i * n + i];
        }
    }
    Ok(())
}

fn check_pivots(op: &str, n: usize, ipiv: &[i32]) -> Result<(), String> {
    check_len(op, "ipiv", ipiv, n)?;
    if i32::try_from(n).is_err() {
        return Err(format!("{op}: n = {n} does not fit the int32 pivot format"));
    }
    if let Some(p) = ipiv.iter().find(|&&p| p < 1 || p as usize > n) {
        return Err(format!("{op}: pivot {p} out of range 1..={n}"));
    }
    Ok(())
}

/// LU factorization with partial pivoting, as MXNet runs LAPACK `getrf`.
///
/// MXNet passes the row-major buffer to the column-major routine, so what is
/// factored is `A^T = P L U`: afterwards `lu[k*n + i]` holds `L[i][k]`
/// (i > k, unit diagonal implied) or `U[k][i]` (k <= i), and `ipiv` the
/// 1-based LAPACK row interchanges (`ipiv[j] != j+1` means a swap). These are
/// the hidden `LU` / `pivot` outputs of MXNet's `det` / `slogdet`.
/// Returns LAPACK's `info`: 0, or the 1-based index of the first exactly
/// zero pivot (the factorization is still completed).
pub fn getrf<T: LaFloat>(lu: &mut [T], n: usize, ipiv: &mut [i32]) -> Result<usize, String> {
    let nn = area("getrf", n, n)?;
    check_len("getrf", "lu", lu, nn)?;
    check_len("getrf", "ipiv", ipiv, n)?;
    if i32::try_from(n).is_err() {
        return Err(format!(
            "getrf: n = {n} does not fit the int32 pivot format"
        ));
    }
    Ok(getrf_impl(lu, n, ipiv))
}

/// Inverse of A (row-major, written to `out`) from the factors produced by
/// [`getrf`], as MXNet's LAPACK `getri` call. Fails on an exactly zero pivot
/// with MXNet's message `... dgetri failed in lapack on cpu.`
pub fn getri<T: LaFloat>(lu: &[T], n: usize, ipiv: &[i32], out: &mut [T]) -> Result<(), String> {
    let nn = area("getri", n, n)?;
    check_len("getri", "lu", lu, nn)?;
    check_len("getri", "out", out, nn)?;
    check_pivots("getri", n, ipiv)?;
    getri_impl(lu, ipiv, n, out).map_err(getri_failure::<T>)
}

pub(super) fn getri_failure<T: LaFloat>(info: usize) -> String {
    lapack_failure(
        info,
        &format!("{}getri failed in lapack on cpu.", T::LAPACK_PREFIX),
    )
}

/// Matrix inverse, as MXNet's `linalg.inverse` (LAPACK getrf + getri).
///
/// Fails when LU hits an exactly zero pivot, with MXNet's message
/// `Check failed: ret == 0 (k vs. 0) : the input matrix is non-convertible`
/// (k = getrf info). A nearly singular matrix gives huge values, no error.
pub fn inverse<T: LaFloat>(a: &[T], n: usize, out: &mut [T]) -> Result<(), String> {
    let nn = area("inverse", n, n)?;
    check_len("inverse", "a", a, nn)?;
    check_len("inverse", "out", out, nn)?;
    let mut lu = a.to_vec();
    let mut ipiv = vec![0i32; n];
    let info = getrf(&mut lu, n, &mut ipiv)?;
    if info != 0 {
        return Err(lapack_failure(info, "the input matrix is non-convertible"));
    }
    getri_impl(&lu, &ipiv, n, out).map_err(getri_failure::<T>)
}

/// `(sign, log|det|)` from getrf factors, exactly as MXNet's `SignedLogDet` kernel.
fn signed_logdet<T: LaFloat>(lu: &[T], ipiv: &[i32], n: usize) -> (T, T) {
    let mut changes = 0usize;
    let mut diag_sign = T::ONE;
    let mut diag_logsum = T::ZERO;
    for (j, &p) in ipiv.iter().enumerate().take(n) {
        if p as usize != j + 1 {
            changes += 1;
        }
        let d = lu[j * n + j];
        let sg = if T::ZERO < d {
            T::ONE
        } else if d < T::ZERO {
            -T::ONE
        } else {
            T::ZERO
        };
        diag_sign *= sg;
        diag_logsum += d.abs().ln();
    }
    let parity = if changes % 2 == 1 { -T::ONE } else { T::ONE };
    (parity * diag_sign, diag_logsum)
}

/// Determinant, as MXNet's `linalg.det`: `sign * exp(sum log|u_jj|)` from the
/// LU factors (so e.g. f32 `det([[4,1,2],[1,5,3],[2,3,6]]) = 69.99999`).
///
/// A singular matrix is not an error: the result is `0.0` or `-0.0` (the sign
/// of zero follows MXNet's sign product). `n == 0` gives 1. Errors only on
/// slice-length mismatch.
pub fn det<T: LaFloat>(a: &[T], n: usize) -> Result<T, String> {
    let (sign, logabs) = slogdet(a, n)?;
    Ok(sign * logabs.exp())
}

/// `(sign, log|det|)`, as MXNet's `linalg.slogdet`.
///
/// sign is ±1, or ±0 with `logabsdet = -inf` for a matrix with an exactly
/// zero LU pivot (no error). `n == 0` gives `(1, 0)`.
pub fn slogdet<T: LaFloat>(a: &[T], n: usize) -> Result<(T, T), String> {
    let nn = area("slogdet", n, n)?;
    check_len("slogdet", "a", a, nn)?;
    let mut lu = a.to_vec();
    let mut ipiv = vec![0i32; n];
    getrf(&mut lu, n, &mut ipiv)?;
    Ok(signed_logdet(&lu, &ipiv, n))
}

// ---------------------------------------------------------------------------
// Householder helpers (LAPACK dlarfg / dlarf conventions)
// ---------------------------------------------------------------------------

fn nrm2<T: LaFloat>(x: &[T]) -> T {
    let mut scale = T::ZERO;
    for &v in x {
        let a = v.abs();
        if a.is_nan() {
            return a;
        }
        if a > scale {
            scale = a;
        }
    }
    if scale == T::ZERO || !scale.is_finite() {
        return scale;
    }
    let mut ssq = T::ZERO;
    for &v in x {
        let t = v / scale;
        ssq += t * t;
    }
    scale * ssq.sqrt()
}

/// Fortran `SIGN(a, b)`.
fn sign_of<T: LaFloat>(a: T, b: T) -> T {
    if b.is_sign_negative() {
        -a.abs()
    } else {
        a.abs()
    }
}

/// Generates an elementary reflector as LAPACK `dlarfg`: on entry `x[0]` is
/// alpha, on exit `x[0]` is beta and `x[1..]` the essential part of v
/// (v[0] = 1); returns tau (0 when `x[1..]` is zero: H = I, beta = alpha).
fn larfg<T: LaFloat>(x: &mut [T]) -> T {
    if x.len() <= 1 {
        return T::ZERO;
    }
    let mut alpha = x[0];
    let mut xnorm = nrm2(&x[1..]);
    if xnorm == T::ZERO {
        return T::ZERO;
    }
    let mut beta = -sign_of(alpha.hypot(xnorm), alpha);
    let safmin = T::MIN_POSITIVE / (T::EPSILON * T::HALF);
    let mut knt = 0;
    if beta.abs() < safmin {
        let rsafmn = T::ONE / safmin;
        loop {
            knt += 1;
            for v in x[1..].iter_mut() {
                *v *= rsafmn;
            }
            beta *= rsafmn;
            alpha *= rsafmn;
            if beta.abs() >= safmin || knt >= 20 {
                break;
            }
        }
        xnorm = nrm2(&x[1..]);
        beta = -sign_of(alpha.hypot(xnorm), alpha);
    }
    let tau = (beta - alpha) / beta;
    let scal = T::ONE / (alpha - beta);
    for v in x[1..].iter_mut() {
        *v *= scal;
    }
    for _ in 0..knt {
        beta *= safmin;
    }
    x[0] = beta;
    tau
}

/// `y <- (I - tau v v^T) y` for one vector y (v[0] must hold 1).
fn apply_reflector<T: LaFloat>(v: &[T], tau: T, y: &mut [T]) {
    if tau == T::ZERO {
        return;
    }
    let f = tau * dot(v, y);
    for (yy, &vv) in y.iter_mut().zip(v) {
        *yy -= f * vv;
    }
}

// ---------------------------------------------------------------------------
// LQ: gelqf
// ---------------------------------------------------------------------------

/// LQ factorization `A = L Q`, as MXNet's `linalg.gelqf`.
///
/// `a` is row-major m×n with `m <= n`; `q_out` (m×n) gets Q with orthonormal
/// rows, `l_out` (m×m) the lower-triangular L (strict upper triangle 0).
/// MXNet runs LAPACK `geqrf` + `orgqr` on the column-major view `A^T`, so
/// this is the Householder QR of `A^T` with LAPACK's `dlarfg` signs (no sign
/// normalization: `L_ii = -sign(pivot) * norm`, often negative; a row whose
/// remainder is zero keeps its own sign and gets tau = 0). Rank deficiency is
/// not an error. Fails for `m > n` with MXNet's shape message.
pub fn gelqf<T: LaFloat>(
    a: &[T],
    m: usize,
    n: usize,
    q_out: &mut [T],
    l_out: &mut [T],
) -> Result<(), String> {
    if m > n {
        return Err(format!(
            "Check failed: in_a[ndim-2] <= in_a[ndim-1] ({m} vs. {n}) : Input A shape wrong: \
             Last dimension must be >= than second to last"
        ));
    }
    let mn = area("gelqf", m, n)?;
    let mm = area("gelqf", m, m)?;
    check_len("gelqf", "a", a, mn)?;
    check_len("gelqf", "q_out", q_out, mn)?;
    check_len("gelqf", "l_out", l_out, mm)?;
    if m == 0 {
        return Ok(());
    }
    // Row i of the row-major buffer is column i of X = A^T (n×m, column-major).
    let x = q_out;
    x.copy_from_slice(a);
    let mut tau = vec![T::ZERO; m];
    // geqr2
    for i in 0..m {
        let (head, tail) = x.split_at_mut((i + 1) * n);
        let col = &mut head[i * n + i..];
        let t = larfg(col);
        tau[i] = t;
        if t != T::ZERO && !tail.is_empty() {
            let beta = col[0];
            col[0] = T::ONE;
            for other in tail.chunks_exact_mut(n) {
                apply_reflector(col, t, &mut other[i..]);
            }
            col[0] = beta;
        }
    }
    // L = R^T
    for (i, lrow) in l_out.chunks_exact_mut(m).enumerate() {
        for (j, v) in lrow.iter_mut().enumerate() {
            *v = if j <= i { x[i * n + j] } else { T::ZERO };
        }
    }
    // org2r
    for i in (0..m).rev() {
        let (head, tail) = x.split_at_mut((i + 1) * n);
        let col = &mut head[i * n..];
        let t = tau[i];
        if !tail.is_empty() {
            col[i] = T::ONE;
            for other in tail.chunks_exact_mut(n) {
                apply_reflector(&col[i..], t, &mut other[i..]);
            }
        }
        for v in col[i + 1..].iter_mut() {
            *v *= -t;
        }
        col[i] = T::ONE - t;
        for v in col[..i].iter_mut() {
            *v = T::ZERO;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Symmetric eigendecomposition: syevd
// ---------------------------------------------------------------------------

/// Householder reduction of the full symmetric `w` to tridiagonal form,
/// accumulating `z <- H_k z` (z = Q^T).
fn tridiagonalize<T: LaFloat>(w: &mut [T], n: usize, z: &mut [T]) {
    let mut v = vec![T::ZERO; n];
    let mut p = vec![T::ZERO; n];
    let mut zt = vec![T::ZERO; n];
    for k in 0..n.saturating_sub(2) {
        let len = n - k - 1;
        let v = &mut v[..len];
        let p = &mut p[..len];
        for (i, vi) in v.iter_mut().enumerate() {
            *vi = w[(k + 1 + i) * n + k];
        }
        let tau = larfg(v);
        let beta = v[0];
        v[0] = T::ONE;
        w[(k + 1) * n + k] = beta;
        w[k * n + k + 1] = beta;
        for i in 1..len {
            w[(k + 1 + i) * n + k] = T::ZERO;
            w[k * n + k + 1 + i] = T::ZERO;
        }
        if tau == T::ZERO {
            continue;
        }
        // p = tau * B v, B = trailing block.
        for (i, pi) in p.iter_mut().enumerate() {
            let r0 = (k + 1 + i) * n + k + 1;
            *pi = tau * dot(&w[r0..r0 + len], v);
        }
        // q = p - (tau/2)(p.v) v
        let kk = T::HALF * tau * dot(p, v);
        for (pi, &vi) in p.iter_mut().zip(v.iter()) {
            *pi -= kk * vi;
        }
        // B -= v q^T + q v^T
        for i in 0..len {
            let r0 = (k + 1 + i) * n + k + 1;
            let (vi, qi) = (v[i], p[i]);
            for (j, b) in w[r0..r0 + len].iter_mut().enumerate() {
                *b -= vi * p[j] + qi * v[j];
            }
        }
        // z rows k+1.. <- H z rows k+1..
        zt.fill(T::ZERO);
        for (i, &vi) in v.iter().enumerate() {
            let row = &z[(k + 1 + i) * n..(k + 2 + i) * n];
            for (t, &x) in zt.iter_mut().zip(row) {
                *t += vi * x;
            }
        }
        for (i, &vi) in v.iter().enumerate() {
            let f = tau * vi;
            let row = &mut z[(k + 1 + i) * n..(k + 2 + i) * n];
            for (x, &t) in row.iter_mut().zip(zt.iter()) {
                *x -= f * t;
            }
        }
    }
}

/// One implicit symmetric QR step with Wilkinson shift on the unreduced
/// block lo..=hi of the tridiagonal (d, e); rotations are applied to the rows of z.
fn qr_step<T: LaFloat>(d: &mut [T], e: &mut [T], z: &mut [T], n: usize, lo: usize, hi: usize) {
    let two = T::ONE + T::ONE;
    let dd = (d[hi - 1] - d[hi]) * T::HALF;
    let eh = e[hi - 1];
    let sgn = if dd >= T::ZERO { T::ONE } else { -T::ONE };
    let mu = d[hi] - eh * (eh / (dd + sgn * dd.hypot(eh)));
    let mut x = d[lo] - mu;
    let mut bulge = e[lo];
    for k in lo..hi {
        let r = x.hypot(bulge);
        let (c, s) = if r == T::ZERO {
            (T::ONE, T::ZERO)
        } else {
            (x / r, -bulge / r)
        };
        if k > lo {
            e[k - 1] = r;
        }
        let (a, b, cc) = (d[k], e[k], d[k + 1]);
        d[k] = c * c * a - two * c * s * b + s * s * cc;
        d[k + 1] = s * s * a + two * c * s * b + c * c * cc;
        e[k] = c * s * (a - cc) + (c * c - s * s) * b;
        if k + 1 < hi {
            x = e[k];
            bulge = -s * e[k + 1];
            e[k + 1] *= c;
        }
        let (head, tail) = z.split_at_mut((k + 1) * n);
        let rk = &mut head[k * n..];
        let rk1 = &mut tail[..n];
        for (p, q) in rk.iter_mut().zip(rk1.iter_mut()) {
            let (u, w) = (*p, *q);
            *p = c * u - s * w;
            *q = s * u + c * w;
        }
    }
}

fn tridiagonal_qr<T: LaFloat>(d: &mut [T], e: &mut [T], z: &mut [T], n: usize) -> bool {
    if n < 2 {
        return true;
    }
    let negligible = |ev: T, a: T, b: T| {
        ev.abs() <= T::EPSILON * (a.abs() + b.abs()) || ev.abs() < T::MIN_POSITIVE
    };
    let mut budget = 30 * n;
    let mut hi = n - 1;
    while hi > 0 {
        if negligible(e[hi - 1], d[hi - 1], d[hi]) {
            e[hi - 1] = T::ZERO;
            hi -= 1;
            continue;
        }
        let mut lo = hi - 1;
        while lo > 0 && !negligible(e[lo - 1], d[lo - 1], d[lo]) {
            lo -= 1;
        }
        if lo > 0 {
            e[lo - 1] = T::ZERO;
        }
        if budget == 0 {
            return false;
        }
        budget -= 1;
        qr_step(d, e, z, n, lo, hi);
    }
    true
}

/// Symmetric eigendecomposition, as MXNet's `linalg.syevd`.
///
/// Only the lower triangle (with diagonal) of the row-major n×n `a` is read.
/// `lam_out` gets the eigenvalues in ascending order and `u_out` the
/// eigenvectors as ROWS (`A = U^T diag(lam) U`, `U U^T = I`). Each row is
/// sign-normalized as MXNet does: its first entry of largest magnitude is
/// made positive. Eigenvectors of repeated eigenvalues are an arbitrary
/// orthonormal basis (as in LAPACK). Non-finite input gives NaN outputs
/// (MXNet/LAPACK give NaN vectors too). Fails (message
/// `... dsyevd failed in lapack on cpu.`) only if the QR iteration does not
/// converge.
pub fn syevd<T: LaFloat>(
    a: &[T],
    n: usize,
    u_out: &mut [T],
    lam_out: &mut [T],
) -> Result<(), String> {
    let nn = area("syevd", n, n)?;
    check_len("syevd", "a", a, nn)?;
    check_len("syevd", "u_out", u_out, nn)?;
    check_len("syevd", "lam_out", lam_out, n)?;
    if n == 0 {
        return Ok(());
    }
    let mut w = vec![T::ZERO; nn];
    let mut anrm = T::ZERO;
    for i in 0..n {
        for j in 0..=i {
            let v = a[i * n + j];
            if !v.is_finite() {
                u_out.fill(T::NAN);
                lam_out.fill(T::NAN);
                return Ok(());
            }
            w[i * n + j] = v;
            w[j * n + i] = v;
            if v.abs() > anrm {
                anrm = v.abs();
            }
        }
    }
    // Scale into a safe range as LAPACK does.
    let smlnum = T::MIN_POSITIVE / T::EPSILON;
    let rmin = smlnum.sqrt();
    let rmax = (T::ONE / smlnum).sqrt();
    let mut sigma = T::ONE;
    if anrm > T::ZERO && anrm < rmin {
        sigma = rmin / anrm;
    } else if anrm > rmax {
        sigma = rmax / anrm;
    }
    if sigma != T::ONE {
        for v in w.iter_mut() {
            *v *= sigma;
        }
    }
    let z = u_out;
    z.fill(T::ZERO);
    for i in 0..n {
        z[i * n + i] = T::ONE;
    }
    tridiagonalize(&mut w, n, z);
    let mut d: Vec<T> = (0..n).map(|i| w[i * n + i]).collect();
    let mut e: Vec<T> = (0..n.saturating_sub(1)).map(|i| w[i * n + i + 1]).collect();
    if !tridiagonal_qr(&mut d, &mut e, z, n) {
        return Err(format!(
            "{}syevd failed in lapack on cpu.",
            T::LAPACK_PREFIX
        ));
    }
    // Ascending order (selection sort, moving the eigenvector rows along).
    for i in 0..n {
        let mut kmin = i;
        for k in i + 1..n {
            if d[k] < d[kmin] {
                kmin = k;
            }
        }
        if kmin != i {
            d.swap(i, kmin);
            let (head, tail) = z.split_at_mut(kmin * n);
            head[i * n..(i + 1) * n].swap_with_slice(&mut tail[..n]);
        }
    }
    for (l, &dv) in lam_out.iter_mut().zip(&d) {
        *l = if sigma == T::ONE { dv } else { dv / sigma };
    }
    // MXNet's sign rule: the first entry of largest magnitude is positive.
    for row in z.chunks_exact_mut(n) {
        let mut kmax = 0;
        let mut vmax = row[0].abs();
        for (j, &x) in row.iter().enumerate().skip(1) {
            if x.abs() > vmax {
                vmax = x.abs();
                kmax = j;
            }
        }
        if row[kmax] < T::ZERO {
            for x in row.iter_mut() {
                *x = -*x;
            }
        }
    }
    Ok(())
}

//! Checks against MXNet 1.9.1's results and round trips.

use super::*;

fn is_f32<T: LaFloat>() -> bool {
    std::mem::size_of::<T>() == 4
}

fn tol<T: LaFloat>() -> f64 {
    [1e-7, 2e-4][usize::from(is_f32::<T>())]
}

fn conv<T: LaFloat>(x: &[f64]) -> Vec<T> {
    x.iter().map(|&v| T::from_f64(v)).collect()
}

fn close<T: LaFloat>(what: &str, got: &[T], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol * (1.0 + w.abs())
        };
        assert!(
            ok,
            "{what}[{i}]: got {g}, want {w}\n got  {got:?}\n want {want:?}"
        );
    }
}

fn exp_of<T: LaFloat>(key: &str) -> &'static [f64] {
    expected(is_f32::<T>(), key)
}

fn matmul(a: &[f64], b: &[f64], r: usize, k: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; r * c];
    for i in 0..r {
        for j in 0..c {
            out[i * c + j] = (0..k).map(|p| a[i * k + p] * b[p * c + j]).sum();
        }
    }
    out
}

fn transpose(a: &[f64], r: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; r * c];
    for i in 0..r {
        for j in 0..c {
            out[j * r + i] = a[i * c + j];
        }
    }
    out
}

fn to64<T: LaFloat>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| v.to_f64()).collect()
}

fn identity(n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        out[i * n + i] = 1.0;
    }
    out
}

/// Symmetric matrix built from the lower triangle of `a`.
fn sym_from_lower(a: &[f64], n: usize) -> Vec<f64> {
    let mut out = a.to_vec();
    for i in 0..n {
        for j in 0..i {
            out[j * n + i] = a[i * n + j];
        }
    }
    out
}

/// Deterministic pseudo-random values in [-1, 1).
fn lcg(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

macro_rules! both {
    ($name32:ident, $name64:ident, $f:ident) => {
        #[test]
        fn $name32() {
            $f::<f32>();
        }
        #[test]
        fn $name64() {
            $f::<f64>();
        }
    };
}

fn check_potrf<T: LaFloat>() {
    let t = tol::<T>();
    for (nm, n) in [("3", 3), ("4", 4)] {
        for (tag, lower) in [("l", true), ("u", false)] {
            let ain = input(&format!("potrf_in{nm}_{tag}"));
            let mut l = conv::<T>(ain);
            potrf(&mut l, n, lower).unwrap();
            close("potrf", &l, exp_of::<T>(&format!("potrf{nm}_{tag}")), t);
            let h = conv::<T>(input(if n == 3 { "h3" } else { "h4" }));
            let mut da = vec![T::ZERO; n * n];
            potrf_backward(&l, &h, n, lower, &mut da).unwrap();
            close(
                "potrf_bw",
                &da,
                exp_of::<T>(&format!("potrf{nm}_{tag}_grad")),
                t,
            );
            // Round trip.
            let l64 = to64(&l);
            let lt = transpose(&l64, n, n);
            let rec = if lower {
                matmul(&l64, &lt, n, n, n)
            } else {
                matmul(&lt, &l64, n, n, n)
            };
            let sym = if lower {
                sym_from_lower(ain, n)
            } else {
                transpose(&sym_from_lower(&transpose(ain, n, n), n), n, n)
            };
            close("potrf_rt", &rec, &sym, 10.0 * t);
        }
    }
    // Not positive definite.
    let mut bad = conv::<T>(&[1.0, 2.0, 2.0, 1.0]);
    let err = potrf(&mut bad, 2, true).unwrap_err();
    let want = format!(
        "Check failed: ret == 0 (2 vs. 0) : {}potrf failed in lapack on cpu. This may happen \
         when the input matrix is either not symmetric or not positive definite.",
        T::LAPACK_PREFIX
    );
    assert_eq!(err, want);
    // lower = false reads the upper triangle only.
    let mut bad = conv::<T>(&[4.0, 100.0, -7.0, 5.0]);
    assert!(potrf(&mut bad, 2, false).unwrap_err().contains("(2 vs. 0)"));
    // NaN propagates without error (OpenBLAS checks `ajj <= 0` only).
    let mut nan = conv::<T>(&[1.0, 2.0, 2.0, f64::NAN]);
    potrf(&mut nan, 2, true).unwrap();
    close("potrf_nan", &nan, &[1.0, 0.0, 2.0, f64::NAN], t);
    // Length mismatch is an error, not a panic.
    assert!(potrf(&mut [T::ONE; 3], 2, true).is_err());
    let mut empty: Vec<T> = vec![];
    potrf(&mut empty, 0, true).unwrap();
}
both!(potrf_f32, potrf_f64, check_potrf);

fn check_potri<T: LaFloat>() {
    let t = tol::<T>();
    for (nm, n) in [("3", 3), ("4", 4)] {
        for (tag, lower) in [("l", true), ("u", false)] {
            let l = conv::<T>(input(&format!("potri_in{nm}_{tag}")));
            let mut out = vec![T::ZERO; n * n];
            potri(&l, n, lower, &mut out).unwrap();
            close("potri", &out, exp_of::<T>(&format!("potri{nm}_{tag}")), t);
            let h = conv::<T>(input(if n == 3 { "h3" } else { "h4" }));
            let mut dl = vec![T::ZERO; n * n];
            potri_backward(&l, &out, &h, n, lower, &mut dl).unwrap();
            close(
                "potri_bw",
                &dl,
                exp_of::<T>(&format!("potri{nm}_{tag}_grad")),
                t,
            );
            // out * A = I with A the SPD matrix.
            let spd = input(if n == 3 { "spd3" } else { "spd4" });
            let prod = matmul(&to64(&out), spd, n, n, n);
            close("potri_rt", &prod, &identity(n), 10.0 * t);
        }
    }
    let l = conv::<T>(&[1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 3.0, 4.0, 5.0]);
    let mut out = vec![T::ZERO; 9];
    let err = potri(&l, 3, true, &mut out).unwrap_err();
    assert!(
        err.starts_with("Check failed: ret == 0 (2 vs. 0) : "),
        "{err}"
    );
    assert!(err.contains(&format!(
        "{}potri failed in lapack on cpu.",
        T::LAPACK_PREFIX
    )));
}
both!(potri_f32, potri_f64, check_potri);

fn check_tri<T: LaFloat>() {
    let t = tol::<T>();
    let a = conv::<T>(input("tri_a"));
    for (op, alpha) in [("trsm", 0.7), ("trmm", -1.3)] {
        for tr in [false, true] {
            for rs in [false, true] {
                for lo in [false, true] {
                    let key = format!("{op}_{}{}{}", tr as u8, rs as u8, lo as u8);
                    let (m, n) = if rs { (2, 3) } else { (3, 2) };
                    let b = conv::<T>(input(if rs { "tri_br" } else { "tri_bl" }));
                    let dc = conv::<T>(input(if rs { "tri_dcr" } else { "tri_dcl" }));
                    let al = T::from_f64(alpha);
                    let mut c = b.clone();
                    let mut da = vec![T::ZERO; 9];
                    let mut db = vec![T::ZERO; 6];
                    if op == "trsm" {
                        trsm(&a, &mut c, m, n, tr, rs, lo, al).unwrap();
                        trsm_backward(&a, &c, &dc, m, n, tr, rs, lo, al, &mut da, &mut db).unwrap();
                        // Round trip: op(T) C = alpha B (or C op(T)).
                        let mut back = c.clone();
                        trmm(&a, &mut back, m, n, tr, rs, lo, T::ONE).unwrap();
                        let want: Vec<f64> = to64(&b).iter().map(|v| v * alpha).collect();
                        close(&format!("{key} rt"), &back, &want, 10.0 * t);
                    } else {
                        trmm(&a, &mut c, m, n, tr, rs, lo, al).unwrap();
                        trmm_backward(&a, &b, &dc, m, n, tr, rs, lo, al, &mut da, &mut db).unwrap();
                    }
                    close(&key, &c, exp_of::<T>(&key), t);
                    close(
                        &format!("{key}_da"),
                        &da,
                        exp_of::<T>(&format!("{key}_da")),
                        t,
                    );
                    close(
                        &format!("{key}_db"),
                        &db,
                        exp_of::<T>(&format!("{key}_db")),
                        t,
                    );
                }
            }
        }
    }
    // Zero on the diagonal: inf/NaN, no error (MXNet: [[0.5, 1], [nan, inf]]).
    let z = conv::<T>(&[2.0, 0.0, 0.0, 0.0]);
    let mut b = conv::<T>(&[1.0, 2.0, 0.0, 4.0]);
    trsm(&z, &mut b, 2, 2, false, false, true, T::ONE).unwrap();
    close("trsm_zero", &b, &[0.5, 1.0, f64::NAN, f64::INFINITY], t);
    assert!(trsm(&z, &mut b, 2, 3, false, false, true, T::ONE).is_err());
}
both!(tri_f32, tri_f64, check_tri);

fn check_lu<T: LaFloat>() {
    let t = tol::<T>();
    for (nm, n) in [("g3", 3), ("g4", 4), ("spd3", 3)] {
        let a64 = input(nm);
        let a = conv::<T>(a64);
        let mut inv = vec![T::ZERO; n * n];
        inverse(&a, n, &mut inv).unwrap();
        close("inverse", &inv, exp_of::<T>(&format!("inv_{nm}")), t);
        close(
            "inverse_rt",
            &matmul(a64, &to64(&inv), n, n, n),
            &identity(n),
            10.0 * t,
        );
        let h = conv::<T>(input(if n == 3 { "h3" } else { "h4" }));
        let mut da = vec![T::ZERO; n * n];
        inverse_backward(&inv, &h, n, &mut da).unwrap();
        close("inverse_bw", &da, exp_of::<T>(&format!("inv_{nm}_grad")), t);
    }
    for (nm, n) in [
        ("g3", 3),
        ("g4", 4),
        ("spd3", 3),
        ("sing1", 3),
        ("sing2", 3),
        ("sing3", 2),
    ] {
        let a = conv::<T>(input(nm));
        let d = det(&a, n).unwrap();
        let want = exp_of::<T>(&format!("det_{nm}"));
        close("det", &[d], want, t);
        assert_eq!(
            d.is_sign_negative(),
            want[0].is_sign_negative(),
            "det sign bit {nm}"
        );
        let mut da = vec![T::ZERO; n * n];
        det_backward(&a, n, d, T::from_f64(0.7), &mut da).unwrap();
        close("det_bw", &da, exp_of::<T>(&format!("det_{nm}_grad")), t);
        let (s, l) = slogdet(&a, n).unwrap();
        let want = exp_of::<T>(&format!("slogdet_{nm}"));
        close("slogdet", &[s, l], want, t);
        assert_eq!(
            s.is_sign_negative(),
            want[0].is_sign_negative(),
            "sign bit {nm}"
        );
        slogdet_backward(&a, n, l, T::from_f64(0.7), &mut da).unwrap();
        close(
            "slogdet_bw",
            &da,
            exp_of::<T>(&format!("slogdet_{nm}_grad")),
            t,
        );
    }
    // Singular inverse: MXNet's error with getrf's info.
    for (nm, info) in [("sing1", 3), ("sing2", 2)] {
        let a = conv::<T>(input(nm));
        let mut out = vec![T::ZERO; 9];
        let err = inverse(&a, 3, &mut out).unwrap_err();
        assert_eq!(
            err,
            format!("Check failed: ret == 0 ({info} vs. 0) : the input matrix is non-convertible")
        );
    }
    let mut out = vec![T::ZERO; 9];
    let err = inverse(&[T::ZERO; 9], 3, &mut out).unwrap_err();
    assert!(err.contains("(1 vs. 0)"), "{err}");
    // Permutation matrix: det -1, logabsdet 0.
    let p = conv::<T>(&[0.0, 1.0, 1.0, 0.0]);
    close("det_perm", &[det(&p, 2).unwrap()], &[-1.0], t);
    // getrf/getri on their own.
    let a = conv::<T>(input("g4"));
    let mut lu = a.clone();
    let mut ipiv = [0i32; 4];
    assert_eq!(getrf(&mut lu, 4, &mut ipiv).unwrap(), 0);
    let mut inv = vec![T::ZERO; 16];
    getri(&lu, 4, &ipiv, &mut inv).unwrap();
    close("getri", &inv, exp_of::<T>("inv_g4"), t);
    assert_eq!(det(&[] as &[T], 0).unwrap(), T::ONE);
}
both!(lu_f32, lu_f64, check_lu);

/// Empty matrices are accepted everywhere and never panic.
fn check_empty<T: LaFloat>() {
    let e: &[T] = &[];
    let mut o: Vec<T> = vec![];
    let mut o2: Vec<T> = vec![];
    let mut o3: Vec<T> = vec![];
    potrf(&mut o, 0, true).unwrap();
    potri(e, 0, false, &mut o).unwrap();
    trsm(e, &mut o, 0, 0, true, true, true, T::ONE).unwrap();
    trmm(e, &mut o, 0, 0, false, false, false, T::ONE).unwrap();
    let mut b3 = vec![T::ONE; 3];
    trsm(e, &mut b3, 3, 0, false, true, true, T::ONE).unwrap_err();
    inverse(e, 0, &mut o).unwrap();
    assert_eq!(slogdet(e, 0).unwrap(), (T::ONE, T::ZERO));
    gelqf(e, 0, 0, &mut o, &mut o2).unwrap();
    syevd(e, 0, &mut o, &mut o2).unwrap();
    potrf_backward(e, e, 0, true, &mut o).unwrap();
    potri_backward(e, e, e, 0, true, &mut o).unwrap();
    trsm_backward(e, e, e, 0, 0, false, false, true, T::ONE, &mut o, &mut o2).unwrap();
    trmm_backward(e, e, e, 0, 0, true, true, false, T::ONE, &mut o, &mut o2).unwrap();
    gelqf_backward(e, e, e, e, 0, 0, &mut o).unwrap();
    syevd_backward(e, e, e, e, 0, &mut o).unwrap();
    inverse_backward(e, e, 0, &mut o).unwrap();
    det_backward(e, 0, T::ONE, T::ONE, &mut o).unwrap();
    slogdet_backward(e, 0, T::ZERO, T::ONE, &mut o3).unwrap();
    // Wrong lengths are errors.
    let mut x = vec![T::ONE; 4];
    assert!(syevd(&x.clone(), 2, &mut x, &mut o).is_err());
    assert!(det(&x, 3).is_err());
    assert!(det_backward(&x.clone(), 2, T::ONE, T::ONE, &mut o).is_err());
    let mut ipiv = [0i32; 1];
    assert!(getrf(&mut x, 2, &mut ipiv).is_err());
    assert!(getri(&x, 2, &[1, 3], &mut o).is_err());
}
both!(empty_f32, empty_f64, check_empty);

fn check_gelqf<T: LaFloat>() {
    let t = tol::<T>();
    for (nm, m, n) in [
        ("23", 2, 3),
        ("33", 3, 3),
        ("34", 3, 4),
        ("22", 2, 2),
        ("23z", 2, 3),
    ] {
        let a64 = input(&format!("lq{nm}"));
        let a = conv::<T>(a64);
        let mut q = vec![T::ZERO; m * n];
        let mut l = vec![T::ZERO; m * m];
        gelqf(&a, m, n, &mut q, &mut l).unwrap();
        close("gelqf_q", &q, exp_of::<T>(&format!("gelqf{nm}_q")), t);
        close("gelqf_l", &l, exp_of::<T>(&format!("gelqf{nm}_l")), t);
        let q64 = to64(&q);
        let qqt = matmul(&q64, &transpose(&q64, m, n), m, n, m);
        close("gelqf_qqt", &qqt, &identity(m), 10.0 * t);
        close("gelqf_lq", &matmul(&to64(&l), &q64, m, m, n), a64, 10.0 * t);
        if nm != "23z" {
            let dq = conv::<T>(input(&format!("lq{nm}_dq")));
            let dl = conv::<T>(input(&format!("lq{nm}_dl")));
            let mut da = vec![T::ZERO; m * n];
            gelqf_backward(&q, &l, &dq, &dl, m, n, &mut da).unwrap();
            close(
                "gelqf_bw",
                &da,
                exp_of::<T>(&format!("gelqf{nm}_grad")),
                5.0 * t,
            );
        }
    }
    let mut q = vec![T::ZERO; 6];
    let mut l = vec![T::ZERO; 9];
    let err = gelqf(&[T::ONE; 6], 3, 2, &mut q, &mut l).unwrap_err();
    assert!(
        err.contains("(3 vs. 2)") && err.contains("Input A shape wrong"),
        "{err}"
    );
}
both!(gelqf_f32, gelqf_f64, check_gelqf);

fn check_syevd<T: LaFloat>() {
    let t = tol::<T>();
    for (nm, n) in [("3", 3), ("4", 4), ("5", 5)] {
        let a64 = input(&format!("ev{nm}_in"));
        let a = conv::<T>(a64);
        let mut u = vec![T::ZERO; n * n];
        let mut lam = vec![T::ZERO; n];
        syevd(&a, n, &mut u, &mut lam).unwrap();
        close("syevd_u", &u, exp_of::<T>(&format!("syevd{nm}_u")), t);
        close("syevd_lam", &lam, exp_of::<T>(&format!("syevd{nm}_lam")), t);
        let u64v = to64(&u);
        let mut dl = vec![0.0; n * n];
        for i in 0..n {
            dl[i * n + i] = lam[i].to_f64();
        }
        let rec = matmul(
            &transpose(&u64v, n, n),
            &matmul(&dl, &u64v, n, n, n),
            n,
            n,
            n,
        );
        close("syevd_rt", &rec, &sym_from_lower(a64, n), 10.0 * t);
        let du = conv::<T>(input(&format!("ev{nm}_du")));
        let dlam = conv::<T>(input(&format!("ev{nm}_dlam")));
        let mut da = vec![T::ZERO; n * n];
        syevd_backward(&u, &lam, &du, &dlam, n, &mut da).unwrap();
        close(
            "syevd_bw",
            &da,
            exp_of::<T>(&format!("syevd{nm}_grad")),
            5.0 * t,
        );
    }
    // Zero matrix: identity eigenvectors, zero eigenvalues (as LAPACK).
    let mut u = vec![T::ZERO; 9];
    let mut lam = vec![T::ZERO; 3];
    syevd(&[T::ZERO; 9], 3, &mut u, &mut lam).unwrap();
    close("syevd_zero", &u, &identity(3), 0.0);
    // NaN input: NaN output, no error.
    let nan = conv::<T>(&[1.0, 2.0, 2.0, f64::NAN]);
    let mut u = vec![T::ZERO; 4];
    let mut lam = vec![T::ZERO; 2];
    syevd(&nan, 2, &mut u, &mut lam).unwrap();
    assert!(u.iter().all(|v| v.is_nan()));
}
both!(syevd_f32, syevd_f64, check_syevd);

/// Larger round trips (n up to 80) for the factorizations.
fn check_large<T: LaFloat>() {
    let eps = if is_f32::<T>() { 1e-4 } else { 1e-11 };
    for &n in &[1usize, 2, 17, 80] {
        let r = lcg(n * n, n as u64 + 7);
        // SPD: R R^T + n I
        let mut spd = matmul(&r, &transpose(&r, n, n), n, n, n);
        for i in 0..n {
            spd[i * n + i] += n as f64;
        }
        let mut l = conv::<T>(&spd);
        potrf(&mut l, n, true).unwrap();
        let l64 = to64(&l);
        let rec = matmul(&l64, &transpose(&l64, n, n), n, n, n);
        close("large potrf", &rec, &spd, eps * n as f64);
        let mut inv = vec![T::ZERO; n * n];
        inverse(&conv::<T>(&r), n, &mut inv).unwrap();
        let prod = matmul(&r, &to64(&inv), n, n, n);
        close("large inverse", &prod, &identity(n), 100.0 * eps * n as f64);
        // Symmetric eigenproblem.
        let sym = sym_from_lower(&r, n);
        let mut u = vec![T::ZERO; n * n];
        let mut lam = vec![T::ZERO; n];
        syevd(&conv::<T>(&sym), n, &mut u, &mut lam).unwrap();
        assert!(lam.windows(2).all(|w| w[0] <= w[1]));
        let u64v = to64(&u);
        let uut = matmul(&u64v, &transpose(&u64v, n, n), n, n, n);
        close("large syevd orth", &uut, &identity(n), eps * n as f64);
        let mut dl = vec![0.0; n * n];
        for i in 0..n {
            dl[i * n + i] = lam[i].to_f64();
        }
        let rec = matmul(
            &transpose(&u64v, n, n),
            &matmul(&dl, &u64v, n, n, n),
            n,
            n,
            n,
        );
        close("large syevd", &rec, &sym, eps * n as f64);
        // LQ of an (n/2+1) x n matrix.
        let m = n / 2 + 1;
        let a = lcg(m * n, 3 * n as u64 + 1);
        let mut q = vec![T::ZERO; m * n];
        let mut lq = vec![T::ZERO; m * m];
        gelqf(&conv::<T>(&a), m, n, &mut q, &mut lq).unwrap();
        let q64 = to64(&q);
        close(
            "large lq orth",
            &matmul(&q64, &transpose(&q64, m, n), m, n, m),
            &identity(m),
            eps * n as f64,
        );
        close(
            "large lq",
            &matmul(&to64(&lq), &q64, m, m, n),
            &a,
            eps * n as f64,
        );
    }
}
both!(large_f32, large_f64, check_large);

/// Test inputs (shared by both dtypes).
#[rustfmt::skip]
fn input(key: &str) -> &'static [f64] {
    match key {
        "spd3" => &[4.0, 1.0, 2.0, 1.0, 5.0, 3.0, 2.0, 3.0, 6.0],
        "spd4" => &[6.0, 1.0, -1.0, 2.0, 1.0, 7.0, 0.5, 1.0, -1.0, 0.5, 5.0, -1.5, 2.0, 1.0, -1.5, 8.0],
        "h3" => &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "h4" => &[0.199, 0.997, 0.335, -0.818, -0.773, 0.405, 0.989, 0.124, -0.923, -0.618, 0.592, 0.935, -0.092, -0.984, -0.435, 0.752],
        "potrf_in3_l" => &[4.0, -9.0, 7.0, 1.0, 5.0, -6.0, 2.0, 3.0, 6.0],
        "potri_in3_l" => &[2.0, -9.0, 7.0, 0.5, 2.17944947177, -6.0, 1.0, 1.14707866935, 1.91942973987],
        "potrf_in3_u" => &[4.0, 1.0, 2.0, 8.0, 5.0, 3.0, 5.0, -4.0, 6.0],
        "potri_in3_u" => &[2.0, 0.5, 1.0, 8.0, 2.17944947177, 1.14707866935, 5.0, -4.0, 1.91942973987],
        "potrf_in4_l" => &[6.0, -9.0, 7.0, 3.0, 1.0, 7.0, -6.0, 2.0, -1.0, 0.5, 5.0, -1.0, 2.0, 1.0, -1.5, 8.0],
        "potri_in4_l" => &[2.44948974278, -9.0, 7.0, 3.0, 0.408248290464, 2.61406452356, -6.0, 2.0, -0.408248290464, 0.255030685225, 2.18364206841, -1.0, 0.816496580928, 0.255030685225, -0.564060994653, 2.63630951848],
        "potrf_in4_u" => &[6.0, 1.0, -1.0, 2.0, 8.0, 7.0, 0.5, 1.0, 5.0, -4.0, 5.0, -1.5, 6.0, -2.0, 9.0, 8.0],
        "potri_in4_u" => &[2.44948974278, 0.408248290464, -0.408248290464, 0.816496580928, 8.0, 2.61406452356, 0.255030685225, 0.255030685225, 5.0, -4.0, 2.18364206841, -0.564060994653, 6.0, -2.0, 9.0, 2.63630951848],
        "tri_a" => &[2.0, 0.5, -1.0, 0.3, 3.0, 0.7, -0.4, 0.6, 1.5],
        "tri_bl" => &[1.0, -2.0, 0.5, 3.0, 2.0, 1.0],
        "tri_br" => &[1.0, 0.5, 2.0, -2.0, 3.0, 1.0],
        "tri_dcl" => &[0.3, -0.1, 0.2, 0.4, -0.5, 0.6],
        "tri_dcr" => &[0.3, 0.2, -0.5, -0.1, 0.4, 0.6],
        "g3" => &[1.0, 2.0, 0.0, 3.0, 1.0, 1.0, 0.0, 1.0, 2.0],
        "g4" => &[2.0, -1.0, 0.5, 3.0, 1.0, 4.0, -2.0, 0.25, 0.5, 1.5, 3.0, -1.0, -2.0, 0.3, 1.0, 2.5],
        "sing1" => &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        "sing2" => &[1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 1.0, 1.0],
        "sing3" => &[0.0, 0.0, 0.0, -1.0],
        "lq23" => &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "lq33" => &[2.0, -1.0, 0.5, 1.0, 3.0, -2.0, 0.5, 0.2, 1.0],
        "lq34" => &[1.0, -2.0, 0.5, 3.0, 0.2, 1.0, 2.0, -1.0, -1.0, 0.5, 0.3, 2.0],
        "lq22" => &[0.0, 1.0, 1.0, 0.0],
        "lq23z" => &[0.0, 0.0, 0.0, 1.0, 2.0, 3.0],
        "lq23_dq" => &[0.955, 0.362, -0.505, -0.99, -0.726, 0.087],
        "lq23_dl" => &[0.479, 1.0, 0.427, -0.612],
        "lq33_dq" => &[0.955, 0.362, -0.505, -0.99, -0.726, 0.087, 0.835, 0.95, 0.347],
        "lq33_dl" => &[0.479, 1.0, 0.427, -0.612, -0.982, -0.279, 0.729, 0.941, 0.124],
        "lq34_dq" => &[0.955, 0.362, -0.505, -0.99, -0.726, 0.087, 0.835, 0.95, 0.347, -0.519, -0.992, -0.714],
        "lq34_dl" => &[0.479, 1.0, 0.427, -0.612, -0.982, -0.279, 0.729, 0.941, 0.124],
        "lq22_dq" => &[0.955, 0.362, -0.505, -0.99],
        "lq22_dl" => &[0.479, 1.0, 0.427, -0.612],
        "lq23z_dq" => &[0.955, 0.362, -0.505, -0.99, -0.726, 0.087],
        "lq23z_dl" => &[0.479, 1.0, 0.427, -0.612],
        "ev3" => &[2.0, -1.0, 0.5, -1.0, 3.0, 1.0, 0.5, 1.0, 4.0],
        "ev4" => &[4.0, 1.0, -2.0, 0.5, 1.0, -3.0, 0.7, 2.0, -2.0, 0.7, 1.0, -1.0, 0.5, 2.0, -1.0, 6.0],
        "ev5" => &[0.6, 0.12, 5.99, -0.38, 0.5, 0.12, -6.0, 0.12, -0.51, 0.44, 5.99, 0.12, 0.5, -0.15, -5.89, -0.38, -0.51, -0.15, 5.9, -0.1, 0.5, 0.44, -5.89, -0.1, -1.6],
        "ev3_in" => &[2.0, -9.0, 7.0, -1.0, 3.0, -6.0, 0.5, 1.0, 4.0],
        "ev3_du" => &[0.995, 0.697, 0.071, -0.589, -0.971, -0.897, -0.401, 0.284, 0.835],
        "ev3_dlam" => &[0.389, 0.863, -0.612],
        "ev4_in" => &[4.0, -9.0, 7.0, 3.0, 1.0, -3.0, -6.0, 2.0, -2.0, 0.7, 1.0, -1.0, 0.5, 2.0, -1.0, 6.0],
        "ev4_du" => &[0.995, 0.697, 0.071, -0.589, -0.971, -0.897, -0.401, 0.284, 0.835, 0.993, 0.685, 0.054, -0.602, -0.975, -0.889, -0.385],
        "ev4_dlam" => &[0.389, 0.863, -0.612, -0.706],
        "ev5_in" => &[0.6, 0.12, 5.99, -0.38, 0.5, 0.12, -6.0, 0.12, -0.51, 0.44, 5.99, 0.12, 0.5, -0.15, -5.89, -0.38, -0.51, -0.15, 5.9, -0.1, 0.5, 0.44, -5.89, -0.1, -1.6],
        "ev5_du" => &[0.995, 0.697, 0.071, -0.589, -0.971, -0.897, -0.401, 0.284, 0.835, 0.993, 0.685, 0.054, -0.602, -0.975, -0.889, -0.385, 0.3, 0.844, 0.991, 0.672, 0.037, -0.615, -0.978, -0.881, -0.37],
        "ev5_dlam" => &[0.389, 0.863, -0.612, -0.706, 0.794],
        _ => panic!("unknown input {key}"),
    }
}

/// Expected values produced by MXNet 1.9.1 (CPU, OpenBLAS) in float64 / float32.
#[rustfmt::skip]
#[allow(clippy::approx_constant)]
fn expected(f32: bool, key: &str) -> &'static [f64] {
    match (f32, key) {
        (false, "potrf3_l") => &[2.0, 0.0, 0.0, 0.5, 2.17944947177, 0.0, 1.0, 1.14707866935, 1.91942973987],
        (false, "potrf3_l_grad") => &[-0.00866274306215, 0.0491659423856, 0.0427425149315, 0.0491659423856, 0.083054879963, 0.0601406752474, 0.0427425149315, 0.0601406752474, 0.234444632513],
        (false, "potri3_l") => &[0.3, 1.38777878078e-17, -0.1, 1.38777878078e-17, 0.285714285714, -0.142857142857, -0.1, -0.142857142857, 0.271428571429],
        (false, "potri3_l_grad") => &[0.02, 0.0, 0.0, -0.0142857142857, -0.0360510438939, 0.0, -0.0828571428571, -0.0622699849077, -0.0178624481915],
        (false, "potrf3_u") => &[2.0, 0.5, 1.0, 0.0, 2.17944947177, 1.14707866935, 0.0, 0.0, 1.91942973987],
        (false, "potrf3_u_grad") => &[0.0438757842829, 0.0160702596181, -0.0457866983749, 0.0160702596181, 0.107203904581, 0.0142575284732, -0.0457866983749, 0.0142575284732, 0.234444632513],
        (false, "potri3_u") => &[0.3, 1.12049517137e-17, -0.1, 1.12049517137e-17, 0.285714285714, -0.142857142857, -0.1, -0.142857142857, 0.271428571429],
        (false, "potri3_u_grad") => &[0.02, -0.0142857142857, -0.0828571428571, 0.0, -0.0360510438939, -0.0622699849077, 0.0, 0.0, -0.0178624481915],
        (false, "potrf4_l") => &[2.44948974278, 0.0, 0.0, 0.0, 0.408248290464, 2.61406452356, 0.0, 0.0, -0.408248290464, 0.255030685225, 2.18364206841, 0.0, 0.816496580928, 0.255030685225, -0.564060994653, 2.63630951848],
        (false, "potrf4_l_grad") => &[0.0560269331365, -0.131184205073, -0.126974390071, -0.044113777205, -0.131184205073, 0.108658788147, -0.123726538553, -0.196003940924, -0.126974390071, -0.123726538553, 0.119340954773, -0.062762841271, -0.044113777205, -0.196003940924, -0.062762841271, 0.142623617358],
        (false, "potri4_l") => &[0.188224471021, -0.0233670653174, 0.0283348666053, -0.0388224471021, -0.0233670653174, 0.150505979761, -0.02502299908, -0.0176632934683, 0.0283348666053, -0.02502299908, 0.219319227231, 0.0371665133395, -0.0388224471021, -0.0176632934683, 0.0371665133395, 0.14388224471],
        (false, "potri4_l_grad") => &[-0.0360673656196, 0.0, 0.0, 0.0, -0.022535455863, -0.0433740094578, 0.0, 0.0, 0.0641395246086, -0.0235906433878, -0.100800218796, 0.0, 0.0702981772921, 0.0398820833304, -0.0520656920614, -0.145065900561],
        (false, "potrf4_u") => &[2.44948974278, 0.408248290464, -0.408248290464, 0.816496580928, 0.0, 2.61406452356, 0.255030685225, 0.255030685225, 0.0, 0.0, 2.18364206841, -0.564060994653, 0.0, 0.0, 0.0, 2.63630951848],
        (false, "potrf4_u_grad") => &[0.0593924515948, 0.221804676433, -0.0060572907558, -0.170246223675, 0.221804676433, 0.064737643939, 0.14513918769, -0.0146779390337, -0.0060572907558, 0.14513918769, 0.200372428096, 0.250933258429, -0.170246223675, -0.0146779390337, 0.250933258429, 0.142623617358],
        (false, "potri4_u") => &[0.188224471021, -0.0233670653174, 0.0283348666053, -0.0388224471021, -0.0233670653174, 0.150505979761, -0.02502299908, -0.0176632934683, 0.0283348666053, -0.02502299908, 0.219319227231, 0.0371665133395, -0.0388224471021, -0.0176632934683, 0.0371665133395, 0.14388224471],
        (false, "potri4_u_grad") => &[-0.0360673656196, -0.022535455863, 0.0641395246086, 0.0702981772921, 0.0, -0.0433740094578, -0.0235906433878, 0.0398820833304, 0.0, 0.0, -0.100800218796, -0.0520656920614, 0.0, 0.0, 0.0, -0.145065900561],
        (false, "trsm_000") => &[0.841944444444, -0.614444444444, -0.101111111111, 0.591111111111, 0.933333333333, 0.466666666667],
        (false, "trsm_000_da") => &[-0.157013888889, 0.0447222222222, -0.116666666667, 0.0, -0.0795277777778, -0.105, 0.0, 0.0, 0.0956666666667],
        (false, "trsm_000_db") => &[0.105, -0.035, 0.0291666666667, 0.0991666666667, -0.176944444444, 0.210388888889],
        (false, "trsm_001") => &[0.35, -0.7, 0.0816666666667, 0.77, 0.994, -0.028],
        (false, "trsm_001_da") => &[-0.00676666666667, 0.0, 0.0, -0.00933333333333, -0.0519555555556, 0.0, 0.396666666667, -0.280777777778, 0.342533333333],
        (false, "trsm_001_db") => &[0.0443333333333, 0.0154, 0.0933333333333, 0.0373333333333, -0.233333333333, 0.28],
        (false, "trsm_010") => &[0.35, 0.0583333333333, 1.13944444444, -0.7, 0.816666666667, -0.381111111111],
        (false, "trsm_010_da") => &[0.116472222222, -0.0225555555556, 0.396666666667, 0.0, -0.0410925925926, -0.307222222222, 0.0, 0.0, 0.532259259259],
        (false, "trsm_010_db") => &[-0.0369444444444, 0.101111111111, -0.233333333333, 0.098, 0.028, 0.28],
        (false, "trsm_011") => &[0.547166666667, -0.07, 0.933333333333, -0.697666666667, 0.606666666667, 0.466666666667],
        (false, "trsm_011_da") => &[-0.116958333333, 0.0, 0.0, 0.0408333333333, -0.0803055555556, 0.0, -0.116666666667, -0.112777777778, 0.138444444444],
        (false, "trsm_011_db") => &[0.105, 0.0361666666667, -0.2198, -0.035, 0.0968333333333, 0.231933333333],
        (false, "trsm_100") => &[0.35, -0.7, 0.0583333333333, 0.816666666667, 1.13944444444, -0.381111111111],
        (false, "trsm_100_da") => &[0.116472222222, -0.0225555555556, 0.396666666667, 0.0, -0.0410925925926, -0.307222222222, 0.0, 0.0, 0.532259259259],
        (false, "trsm_100_db") => &[-0.0369444444444, 0.098, 0.101111111111, 0.028, -0.233333333333, 0.28],
        (false, "trsm_101") => &[0.547166666667, -0.697666666667, -0.07, 0.606666666667, 0.933333333333, 0.466666666667],
        (false, "trsm_101_da") => &[-0.116958333333, 0.0, 0.0, 0.0408333333333, -0.0803055555556, 0.0, -0.116666666667, -0.112777777778, 0.138444444444],
        (false, "trsm_101_db") => &[0.105, -0.035, 0.0361666666667, 0.0968333333333, -0.2198, 0.231933333333],
        (false, "trsm_110") => &[0.841944444444, -0.101111111111, 0.933333333333, -0.614444444444, 0.591111111111, 0.466666666667],
        (false, "trsm_110_da") => &[-0.157013888889, 0.0447222222222, -0.116666666667, 0.0, -0.0795277777778, -0.105, 0.0, 0.0, 0.0956666666667],
        (false, "trsm_110_db") => &[0.105, 0.0291666666667, -0.176944444444, -0.035, 0.0991666666667, 0.210388888889],
        (false, "trsm_111") => &[0.35, 0.0816666666667, 0.994, -0.7, 0.77, -0.028],
        (false, "trsm_111_da") => &[-0.00676666666667, 0.0, 0.0, -0.00933333333333, -0.0519555555556, 0.0, 0.396666666667, -0.280777777778, 0.342533333333],
        (false, "trsm_111_db") => &[0.0443333333333, 0.0933333333333, -0.233333333333, 0.0154, 0.0373333333333, 0.28],
        (false, "trmm_000") => &[-0.325, 4.55, -3.77, -12.61, -3.9, -1.95],
        (false, "trmm_000_da") => &[-0.65, 0.195, -0.65, 0.0, -1.69, -1.04, 0.0, 0.0, 0.52],
        (false, "trmm_000_db") => &[-0.78, 0.26, -0.975, -1.495, 1.183, -1.664],
        (false, "trmm_001") => &[-2.6, 5.2, -2.34, -10.92, -3.77, -5.33],
        (false, "trmm_001_da") => &[-0.65, 0.0, 0.0, 0.78, -1.69, 0.0, 2.21, -2.015, 0.52],
        (false, "trmm_001_db") => &[-1.118, 0.416, -0.39, -2.028, 0.975, -1.17],
        (false, "trmm_010") => &[-2.6, -2.6, -3.055, 5.2, -10.4, -7.28],
        (false, "trmm_010_da") => &[-0.65, 0.78, 2.21, 0.0, -1.69, -2.015, 0.0, 0.0, 0.52],
        (false, "trmm_010_db") => &[-1.56, -0.325, 0.975, 0.78, -2.106, -1.17],
        (false, "trmm_011") => &[-1.755, -3.51, -3.9, 4.55, -12.48, -1.95],
        (false, "trmm_011_da") => &[-0.65, 0.0, 0.0, 0.195, -1.69, 0.0, -0.65, -1.04, 0.52],
        (false, "trmm_011_db") => &[-0.78, -0.897, 0.975, 0.26, -1.521, -1.534],
        (false, "trmm_100") => &[-2.6, 5.2, -2.6, -10.4, -3.055, -7.28],
        (false, "trmm_100_da") => &[-0.65, 0.78, 2.21, 0.0, -1.69, -2.015, 0.0, 0.0, 0.52],
        (false, "trmm_100_db") => &[-1.56, 0.78, -0.325, -2.106, 0.975, -1.17],
        (false, "trmm_101") => &[-1.755, 4.55, -3.51, -12.48, -3.9, -1.95],
        (false, "trmm_101_da") => &[-0.65, 0.0, 0.0, 0.195, -1.69, 0.0, -0.65, -1.04, 0.52],
        (false, "trmm_101_db") => &[-0.78, 0.26, -0.897, -1.521, 0.975, -1.534],
        (false, "trmm_110") => &[-0.325, -3.77, -3.9, 4.55, -12.61, -1.95],
        (false, "trmm_110_da") => &[-0.65, 0.195, -0.65, 0.0, -1.69, -1.04, 0.0, 0.0, 0.52],
        (false, "trmm_110_db") => &[-0.78, -0.975, 1.183, 0.26, -1.495, -1.664],
        (false, "trmm_111") => &[-2.6, -2.34, -3.77, 5.2, -10.92, -5.33],
        (false, "trmm_111_da") => &[-0.65, 0.0, 0.0, 0.78, -1.69, 0.0, 2.21, -2.015, 0.52],
        (false, "trmm_111_db") => &[-1.118, -0.39, 0.975, 0.416, -2.028, -1.17],
        (false, "inv_g3") => &[-0.0909090909091, 0.363636363636, -0.181818181818, 0.545454545455, -0.181818181818, 0.0909090909091, -0.272727272727, 0.0909090909091, 0.454545454545],
        (false, "inv_g3_grad") => &[-0.00165289256198, -0.00826446280992, -0.0231404958678, -0.00247933884298, -0.0123966942149, -0.0347107438017, -0.0305785123967, -0.152892561983, -0.128099173554],
        (false, "inv_g4") => &[0.219887454055, 0.0454087109261, 0.0733175031715, -0.23907881469, -0.0448882672478, 0.191913606349, 0.109293172429, 0.0783918290343, 0.0407897732817, -0.0874345379436, 0.248511856358, 0.0592004683993, 0.164980646001, 0.0482711511564, -0.0538659206974, 0.175649741405],
        (false, "inv_g4_grad") => &[-0.0104568616232, 0.00238652292279, 0.00607061420684, -0.00178803823422, -0.0157717323751, -0.0375347553578, -0.0154885657041, 0.0216015812876, 0.0764929741876, -0.0609710757147, -0.0704864677338, 0.0385334758826, 0.1553594768, 0.0458232747962, -0.0414100759374, -0.0217384214425],
        (false, "inv_spd3") => &[0.3, 0.0, -0.1, 0.0, 0.285714285714, -0.142857142857, -0.1, -0.142857142857, 0.271428571429],
        (false, "inv_spd3_grad") => &[0.012, 0.00571428571429, -0.00685714285714, 4.99600361081e-18, -0.00204081632653, -0.00612244897959, -0.024, -0.0175510204082, -0.00465306122449],
        (false, "det_g3") => &[-11.0],
        (false, "det_g3_grad") => &[0.7, -4.2, 2.1, -2.8, 1.4, -0.7, 1.4, -0.7, -3.5],
        (false, "slogdet_g3") => &[-1.0, 2.3978952728],
        (false, "slogdet_g3_grad") => &[-0.0636363636364, 0.381818181818, -0.190909090909, 0.254545454545, -0.127272727273, 0.0636363636364, -0.127272727273, 0.0636363636364, 0.318181818182],
        (false, "det_g4") => &[192.14375],
        (false, "det_g4_grad") => &[29.575, -6.0375, 5.48625, 22.19, 6.1075, 25.8125, -11.76, 6.4925, 9.86125, 14.7, 33.425, -7.245, -32.15625, 10.54375, 7.9625, 23.625],
        (false, "slogdet_g4") => &[1.0, 5.25824378981],
        (false, "slogdet_g4_grad") => &[0.153921217838, -0.0314217870735, 0.0285528412972, 0.115486452201, 0.0317860976482, 0.134339524445, -0.0612041765605, 0.0337898058095, 0.05132225222, 0.0765052207006, 0.17395829945, -0.0377061444882, -0.167355170283, 0.054874280324, 0.0414403278795, 0.122954818983],
        (false, "det_spd3") => &[70.0],
        (false, "det_spd3_grad") => &[14.7, 0.0, -4.9, 0.0, 14.0, -7.0, -4.9, -7.0, 13.3],
        (false, "slogdet_spd3") => &[1.0, 4.24849524205],
        (false, "slogdet_spd3_grad") => &[0.21, 0.0, -0.07, 0.0, 0.2, -0.1, -0.07, -0.1, 0.19],
        (false, "det_sing1") => &[0.0],
        (false, "det_sing1_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (false, "slogdet_sing1") => &[0.0, f64::NEG_INFINITY],
        (false, "slogdet_sing1_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (false, "det_sing2") => &[-0.0],
        (false, "det_sing2_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (false, "slogdet_sing2") => &[-0.0, f64::NEG_INFINITY],
        (false, "slogdet_sing2_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (false, "det_sing3") => &[-0.0],
        (false, "det_sing3_grad") => &[0.0, 0.0, 0.0, 0.0],
        (false, "slogdet_sing3") => &[-0.0, f64::NEG_INFINITY],
        (false, "slogdet_sing3_grad") => &[0.0, 0.0, 0.0, 0.0],
        (false, "gelqf23_q") => &[-0.267261241912, -0.534522483825, -0.801783725737, 0.872871560944, 0.218217890236, -0.436435780472],
        (false, "gelqf23_l") => &[-3.74165738677, 0.0, -8.5523597412, 1.96396101212],
        (false, "gelqf23_grad") => &[0.674756131555, 0.156799447728, -0.926869638426, -0.601728426029, -0.454969488548, -0.0286734336756],
        (false, "gelqf33_q") => &[-0.872871560944, 0.436435780472, -0.218217890236, -0.484250055026, -0.719831162877, 0.497337894351, 0.0599760143904, 0.539784129514, 0.839664201466],
        (false, "gelqf33_l") => &[-2.29128784748, 0.0, 0.0, 0.872871560944, -3.63841933236, 0.0, -0.567366514614, 0.111246634263, 0.977609034564],
        (false, "gelqf33_grad") => &[0.0107996828998, 0.581512313436, -1.07522786261, 0.985935530681, 0.225616736423, -0.687972324565, -1.08456564392, -0.292266208244, 0.413032477584],
        (false, "gelqf34_q") => &[-0.264906471413, 0.529812942826, -0.132453235707, -0.794719414239, -0.208145361708, -0.208145361708, -0.95152165352, 0.0892051550175, -0.635569043316, 0.532247433994, 0.0745635438941, 0.554260713119],
        (false, "gelqf34_l") => &[-3.77491721764, 0.0, 0.0, 1.00664459137, -2.24202289611, 0.0, -1.09936185636, -0.00297350516725, 2.03258324972],
        (false, "gelqf34_grad") => &[0.196857467022, 0.209261084454, 0.998080266666, -0.695186926231, 1.1006110773, -0.490003709442, 0.891703893098, -0.0720737018451, -0.462220520242, 0.261393667669, -0.984839138665, -0.424829075581],
        (false, "gelqf22_q") => &[0.0, -1.0, -1.0, 0.0],
        (false, "gelqf22_l") => &[-1.0, 0.0, 0.0, -1.0],
        (false, "gelqf22_grad") => &[-2.372, -0.479, 0.612, -0.427],
        (false, "gelqf23z_q") => &[1.0, 0.0, 0.0, 0.0, -0.554700196225, -0.832050294338],
        (false, "gelqf23z_l") => &[0.0, 0.0, 1.0, -3.60555127546],
        (false, "syevd3_u") => &[0.764760662123, 0.559123593684, -0.320190469338, 0.642490747066, -0.624402509196, 0.44421520285, -0.0484434681113, 0.545437726506, 0.836750211773],
        (false, "syevd3_lam") => &[1.0595504398, 3.31754443856, 4.62290512164],
        (false, "syevd3_grad") => &[0.357454832376, -0.010012993408, 0.308495284138, -0.010012993408, 0.0427280685972, -0.842447750247, 0.308495284138, -0.842447750247, 0.239817099027],
        (false, "syevd4_u") => &[-0.169635393892, 0.930967707496, -0.248794993055, -0.206455835883, 0.389423811791, 0.305605043219, 0.8688102952, 0.0111051034753, 0.820680717097, -0.0433858377521, -0.34681213372, -0.452020103062, 0.382172851646, 0.194993215886, -0.250980210952, 0.867715674017],
        (false, "syevd4_lam") => &[-3.81281397271, 0.336990825285, 4.51692256114, 6.95890058629],
        (false, "syevd4_grad") => &[-0.262755657885, -0.036255247742, 0.734464958677, -0.0769373997325, -0.036255247742, 0.280428749876, 0.0278658621361, -0.248019443874, 0.734464958677, 0.0278658621361, 0.4987687061, -0.0294311437715, -0.0769373997325, -0.248019443874, -0.0294311437715, -0.582441798091],
        (false, "syevd5_u") => &[-0.4547003045, -0.10226862958, 0.665081466847, -0.00455277308542, 0.583467801344, -0.0878241864302, 0.992077173642, 0.0783215603221, 0.0407881788901, 0.0164879188705, 0.698670556303, 0.0578113903833, -0.126562895609, 0.0585670162245, 0.699334708822, 0.0238415580346, -0.044454442979, 0.092085269979, 0.990708097492, -0.0864473899312, 0.544817014448, 0.00237793701045, 0.72597142654, -0.11568477382, -0.403424450347],
        (false, "syevd5_lam") => &[-8.77986991234, -6.01480489871, -0.00652690424888, 5.90852311835, 8.29267859695],
        (false, "syevd5_grad") => &[0.0759248704409, -0.128731798203, 0.167737295269, -0.157763894494, -0.610391187266, -0.128731798203, 0.826894686523, 0.130853746743, 0.0470931922223, 0.0141781636296, 0.167737295269, 0.130853746743, 0.536806226154, -0.235616400263, -0.0452861220002, -0.157763894494, 0.0470931922223, -0.235616400263, -0.629132759377, 0.249930751072, -0.610391187266, 0.0141781636296, -0.0452861220002, 0.249930751072, -0.0824930237415],
        (true, "potrf3_l") => &[2.0, 0.0, 0.0, 0.5, 2.17944956, 0.0, 1.0, 1.14707863, 1.91942978],
        (true, "potrf3_l_grad") => &[-0.00866274256, 0.049165938, 0.0427425243, 0.0491659418, 0.0830548778, 0.0601406842, 0.0427425243, 0.060140688, 0.234444603],
        (true, "potri3_l") => &[0.299999982, -3.7252903e-09, -0.0999999866, -3.7252903e-09, 0.285714269, -0.142857119, -0.0999999866, -0.142857119, 0.271428555],
        (true, "potri3_l_grad") => &[0.019999994, 0.0, 0.0, -0.0142857209, -0.0360510461, 0.0, -0.0828571394, -0.0622699931, -0.0178624447],
        (true, "potrf3_u") => &[2.0, 0.5, 1.0, 0.0, 2.17944956, 1.14707863, 0.0, 0.0, 1.91942978],
        (true, "potrf3_u_grad") => &[0.0438757762, 0.0160702579, -0.0457866862, 0.0160702597, 0.107203893, 0.014257553, -0.04578669, 0.0142575586, 0.234444603],
        (true, "potri3_u") => &[0.300000012, -6.77617873e-09, -0.099999994, -6.77617873e-09, 0.285714239, -0.142857105, -0.099999994, -0.142857105, 0.271428555],
        (true, "potri3_u_grad") => &[0.0199999977, -0.0142857209, -0.0828571469, 0.0, -0.0360510424, -0.0622700006, 0.0, 0.0, -0.0178624373],
        (true, "potrf4_l") => &[2.44948983, 0.0, 0.0, 0.0, 0.408248276, 2.61406446, 0.0, 0.0, -0.408248276, 0.255030662, 2.18364215, 0.0, 0.816496551, 0.255030692, -0.564060986, 2.63630962],
        (true, "potrf4_l_grad") => &[0.0560269244, -0.131184176, -0.126974389, -0.0441137664, -0.131184205, 0.108658798, -0.123726539, -0.196003973, -0.126974389, -0.123726532, 0.119340956, -0.0627628416, -0.0441137739, -0.196003944, -0.062762849, 0.142623603],
        (true, "potri4_l") => &[0.188224465, -0.0233670659, 0.0283348709, -0.0388224423, -0.0233670659, 0.15050599, -0.0250229985, -0.0176632926, 0.0283348709, -0.0250229985, 0.219319209, 0.0371665098, -0.0388224423, -0.0176632926, 0.0371665098, 0.14388223],
        (true, "potri4_l_grad") => &[-0.0360673591, 0.0, 0.0, 0.0, -0.0225354526, -0.0433740169, 0.0, 0.0, 0.0641395152, -0.0235906448, -0.100800216, 0.0, 0.0702981651, 0.0398820788, -0.0520656854, -0.145065874],
        (true, "potrf4_u") => &[2.44948983, 0.408248276, -0.408248276, 0.816496551, 0.0, 2.61406446, 0.255030662, 0.255030692, 0.0, 0.0, 2.18364215, -0.564060986, 0.0, 0.0, 0.0, 2.63630962],
        (true, "potrf4_u_grad") => &[0.0593924485, 0.221804664, -0.00605729269, -0.170246229, 0.221804634, 0.0647376403, 0.145139173, -0.0146779362, -0.00605728989, 0.145139202, 0.200372428, 0.25093326, -0.170246214, -0.0146779362, 0.25093326, 0.142623603],
        (true, "potri4_u") => &[0.188224465, -0.0233670659, 0.0283348672, -0.038822446, -0.0233670659, 0.15050599, -0.0250229985, -0.0176632926, 0.0283348672, -0.0250229985, 0.219319209, 0.0371665061, -0.038822446, -0.0176632926, 0.0371665061, 0.14388223],
        (true, "potri4_u_grad") => &[-0.0360673629, -0.0225354526, 0.0641395152, 0.0702981651, 0.0, -0.0433740169, -0.0235906504, 0.0398820788, 0.0, 0.0, -0.100800216, -0.0520656854, 0.0, 0.0, 0.0, -0.145065874],
        (true, "trsm_000") => &[0.841944456, -0.614444435, -0.101111107, 0.591111124, 0.933333337, 0.466666669],
        (true, "trsm_000_da") => &[-0.157013908, 0.0447222218, -0.116666675, 0.0, -0.0795277953, -0.105000012, 0.0, 0.0, 0.095666647],
        (true, "trsm_000_db") => &[0.105000004, -0.0350000001, 0.0291666668, 0.0991666764, -0.176944435, 0.210388899],
        (true, "trsm_001") => &[0.349999994, -0.699999988, 0.0816666633, 0.769999981, 0.993999958, -0.0279999971],
        (true, "trsm_001_da") => &[-0.0067666606, 0.0, 0.0, -0.00933333952, -0.0519555435, 0.0, 0.396666706, -0.280777812, 0.34253332],
        (true, "trsm_001_db") => &[0.044333335, 0.0154000064, 0.0933333337, 0.0373333246, -0.233333334, 0.280000031],
        (true, "trsm_010") => &[0.349999994, 0.0583333336, 1.13944447, -0.699999988, 0.816666603, -0.381111115],
        (true, "trsm_010_da") => &[0.116472237, -0.0225555655, 0.396666706, 0.0, -0.0410925858, -0.307222247, 0.0, 0.0, 0.532259285],
        (true, "trsm_010_db") => &[-0.0369444415, 0.101111114, -0.233333334, 0.0980000198, 0.0279999934, 0.280000031],
        (true, "trsm_011") => &[0.547166646, -0.0700000077, 0.933333337, -0.697666705, 0.606666684, 0.466666669],
        (true, "trsm_011_da") => &[-0.116958335, 0.0, 0.0, 0.0408333354, -0.0803055614, 0.0, -0.116666675, -0.112777784, 0.138444453],
        (true, "trsm_011_db") => &[0.105000004, 0.0361666679, -0.219799995, -0.0350000001, 0.0968333408, 0.23193334],
        (true, "trsm_100") => &[0.349999994, -0.699999988, 0.0583333336, 0.816666603, 1.13944447, -0.381111115],
        (true, "trsm_100_da") => &[0.116472237, -0.0225555655, 0.396666706, 0.0, -0.0410925858, -0.307222247, 0.0, 0.0, 0.532259285],
        (true, "trsm_100_db") => &[-0.0369444415, 0.0980000198, 0.101111114, 0.0279999934, -0.233333334, 0.280000031],
        (true, "trsm_101") => &[0.547166646, -0.697666705, -0.0700000077, 0.606666684, 0.933333337, 0.466666669],
        (true, "trsm_101_da") => &[-0.116958335, 0.0, 0.0, 0.0408333354, -0.0803055614, 0.0, -0.116666675, -0.112777784, 0.138444453],
        (true, "trsm_101_db") => &[0.105000004, -0.0350000001, 0.0361666679, 0.0968333408, -0.219799995, 0.23193334],
        (true, "trsm_110") => &[0.841944456, -0.101111107, 0.933333337, -0.614444435, 0.591111124, 0.466666669],
        (true, "trsm_110_da") => &[-0.157013908, 0.0447222218, -0.116666675, 0.0, -0.0795277953, -0.105000012, 0.0, 0.0, 0.095666647],
        (true, "trsm_110_db") => &[0.105000004, 0.0291666668, -0.176944435, -0.0350000001, 0.0991666764, 0.210388899],
        (true, "trsm_111") => &[0.349999994, 0.0816666633, 0.993999958, -0.699999988, 0.769999981, -0.0279999971],
        (true, "trsm_111_da") => &[-0.0067666606, 0.0, 0.0, -0.00933333952, -0.0519555435, 0.0, 0.396666706, -0.280777812, 0.34253332],
        (true, "trsm_111_db") => &[0.044333335, 0.0933333337, -0.233333334, 0.0154000064, 0.0373333246, 0.280000031],
        (true, "trmm_000") => &[-0.325000048, 4.55000019, -3.76999974, -12.6099997, -3.89999986, -1.94999993],
        (true, "trmm_000_da") => &[-0.649999976, 0.195000008, -0.649999976, 0.0, -1.69000006, -1.03999996, 0.0, 0.0, 0.519999921],
        (true, "trmm_000_db") => &[-0.780000031, 0.25999999, -0.974999964, -1.49499989, 1.18299997, -1.66400003],
        (true, "trmm_001") => &[-2.5999999, 5.19999981, -2.33999991, -10.9199991, -3.76999998, -5.32999992],
        (true, "trmm_001_da") => &[-0.649999976, 0.0, 0.0, 0.780000031, -1.69000006, 0.0, 2.21000004, -2.0150001, 0.519999921],
        (true, "trmm_001_db") => &[-1.11800003, 0.416000009, -0.389999956, -2.02799988, 0.974999964, -1.17000008],
        (true, "trmm_010") => &[-2.5999999, -2.5999999, -3.05499983, 5.19999981, -10.3999996, -7.27999973],
        (true, "trmm_010_da") => &[-0.649999976, 0.780000031, 2.21000004, 0.0, -1.69000006, -2.0150001, 0.0, 0.0, 0.519999921],
        (true, "trmm_010_db") => &[-1.55999994, -0.324999988, 0.974999964, 0.780000031, -2.10599995, -1.17000008],
        (true, "trmm_011") => &[-1.75499988, -3.50999999, -3.89999986, 4.54999971, -12.4799995, -1.94999993],
        (true, "trmm_011_da") => &[-0.649999976, 0.0, 0.0, 0.195000008, -1.69000006, 0.0, -0.649999976, -1.03999996, 0.519999921],
        (true, "trmm_011_db") => &[-0.780000031, -0.896999955, 0.974999964, 0.25999999, -1.52099991, -1.53400004],
        (true, "trmm_100") => &[-2.5999999, 5.19999981, -2.5999999, -10.3999996, -3.05499983, -7.27999973],
        (true, "trmm_100_da") => &[-0.649999976, 0.780000031, 2.21000004, 0.0, -1.69000006, -2.0150001, 0.0, 0.0, 0.519999921],
        (true, "trmm_100_db") => &[-1.55999994, 0.780000031, -0.324999988, -2.10599995, 0.974999964, -1.17000008],
        (true, "trmm_101") => &[-1.75499988, 4.54999971, -3.50999999, -12.4799995, -3.89999986, -1.94999993],
        (true, "trmm_101_da") => &[-0.649999976, 0.0, 0.0, 0.195000008, -1.69000006, 0.0, -0.649999976, -1.03999996, 0.519999921],
        (true, "trmm_101_db") => &[-0.780000031, 0.25999999, -0.896999955, -1.52099991, 0.974999964, -1.53400004],
        (true, "trmm_110") => &[-0.325000048, -3.76999974, -3.89999986, 4.55000019, -12.6099997, -1.94999993],
        (true, "trmm_110_da") => &[-0.649999976, 0.195000008, -0.649999976, 0.0, -1.69000006, -1.03999996, 0.0, 0.0, 0.519999921],
        (true, "trmm_110_db") => &[-0.780000031, -0.974999964, 1.18299997, 0.25999999, -1.49499989, -1.66400003],
        (true, "trmm_111") => &[-2.5999999, -2.33999991, -3.76999998, 5.19999981, -10.9199991, -5.32999992],
        (true, "trmm_111_da") => &[-0.649999976, 0.0, 0.0, 0.780000031, -1.69000006, 0.0, 2.21000004, -2.0150001, 0.519999921],
        (true, "trmm_111_db") => &[-1.11800003, -0.389999956, 0.974999964, 0.416000009, -2.02799988, -1.17000008],
        (true, "inv_g3") => &[-0.0909090862, 0.363636374, -0.181818172, 0.545454562, -0.181818187, 0.0909090862, -0.272727281, 0.0909090862, 0.454545438],
        (true, "inv_g3_grad") => &[-0.00165289128, -0.00826447457, -0.0231405031, -0.00247934111, -0.0123966886, -0.0347107388, -0.0305785201, -0.152892545, -0.128099158],
        (true, "inv_g4") => &[0.219887465, 0.0454087108, 0.0733175054, -0.239078805, -0.0448882654, 0.19191359, 0.109293178, 0.0783918276, 0.0407897756, -0.0874345452, 0.248511866, 0.0592004694, 0.164980635, 0.0482711494, -0.0538659245, 0.175649732],
        (true, "inv_g4_grad") => &[-0.0104568666, 0.00238652108, 0.0060706134, -0.00178803445, -0.0157717355, -0.0375347473, -0.015488564, 0.0216015782, 0.0764929801, -0.0609710813, -0.0704864711, 0.038533479, 0.155359462, 0.0458232686, -0.0414100774, -0.0217384174],
        (true, "inv_spd3") => &[0.300000012, 0.0, -0.100000009, 3.7252903e-09, 0.285714298, -0.142857149, -0.100000001, -0.142857149, 0.271428585],
        (true, "inv_spd3_grad") => &[0.012000001, 0.00571428705, -0.00685714418, 2.34161135e-10, -0.00204081461, -0.00612245174, -0.0240000039, -0.0175510254, -0.00465306081],
        (true, "det_g3") => &[-11.000001],
        (true, "det_g3_grad") => &[0.700000048, -4.20000076, 2.10000038, -2.80000043, 1.40000021, -0.700000048, 1.4000001, -0.700000048, -3.50000024],
        (true, "slogdet_g3") => &[-1.0, 2.39789534],
        (true, "slogdet_g3_grad") => &[-0.0636363626, 0.381818175, -0.190909088, 0.25454545, -0.127272725, 0.0636363626, -0.127272725, 0.0636363626, 0.318181813],
        (true, "det_g4") => &[192.143799],
        (true, "det_g4_grad") => &[29.5750084, -6.03750134, 5.48625135, 22.1900043, 6.10750151, 25.8125038, -11.760004, 6.49250126, 9.86125278, 14.7000046, 33.4250107, -7.24500227, -32.1562576, 10.5437527, 7.962502, 23.6250038],
        (true, "slogdet_g4") => &[1.0, 5.25824404],
        (true, "slogdet_g4_grad") => &[0.153921217, -0.0314217843, 0.0285528433, 0.115486443, 0.0317860954, 0.134339511, -0.0612041801, 0.0337898023, 0.0513222516, 0.0765052214, 0.173958302, -0.0377061479, -0.167355165, 0.0548742786, 0.0414403267, 0.122954808],
        (true, "det_spd3") => &[69.9999924],
        (true, "det_spd3_grad") => &[14.6999979, 1.82539196e-07, -4.89999914, 0.0, 13.9999981, -6.99999905, -4.89999962, -6.99999905, 13.2999983],
        (true, "slogdet_spd3") => &[1.0, 4.2484951],
        (true, "slogdet_spd3_grad") => &[0.210000008, 2.60770316e-09, -0.0700000003, 0.0, 0.200000003, -0.100000001, -0.0700000077, -0.100000001, 0.190000013],
        (true, "det_sing1") => &[0.0],
        (true, "det_sing1_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (true, "slogdet_sing1") => &[0.0, f64::NEG_INFINITY],
        (true, "slogdet_sing1_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (true, "det_sing2") => &[-0.0],
        (true, "det_sing2_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (true, "slogdet_sing2") => &[-0.0, f64::NEG_INFINITY],
        (true, "slogdet_sing2_grad") => &[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        (true, "det_sing3") => &[-0.0],
        (true, "det_sing3_grad") => &[0.0, 0.0, 0.0, 0.0],
        (true, "slogdet_sing3") => &[-0.0, f64::NEG_INFINITY],
        (true, "slogdet_sing3_grad") => &[0.0, 0.0, 0.0, 0.0],
        (true, "gelqf23_q") => &[-0.267261147, -0.534522474, -0.801783681, 0.872871637, 0.218217939, -0.436435789],
        (true, "gelqf23_l") => &[-3.7416575, 0.0, -8.55235863, 1.96396053],
        (true, "gelqf23_grad") => &[0.674755991, 0.156799495, -0.926869333, -0.60172838, -0.454969496, -0.0286734905],
        (true, "gelqf33_q") => &[-0.872871518, 0.436435759, -0.21821788, -0.484250098, -0.719831228, 0.497337937, 0.0599760413, 0.539784193, 0.839664161],
        (true, "gelqf33_l") => &[-2.2912879, 0.0, 0.0, 0.872871578, -3.63841915, 0.0, -0.567366481, 0.111246616, 0.977609038],
        (true, "gelqf33_grad") => &[0.0107995905, 0.581512392, -1.07522774, 0.98593545, 0.225616679, -0.687972367, -1.08456576, -0.292266697, 0.413032651],
        (true, "gelqf34_q") => &[-0.264906526, 0.529812932, -0.132453233, -0.794719398, -0.208145425, -0.208145425, -0.951521635, 0.0892051682, -0.635568917, 0.532247365, 0.0745636001, 0.55426079],
        (true, "gelqf34_l") => &[-3.77491736, 0.0, 0.0, 1.00664449, -2.24202299, 0.0, -1.09936166, -0.00297343731, 2.03258348],
        (true, "gelqf34_grad") => &[0.196857452, 0.209261119, 0.998080134, -0.695186973, 1.10061121, -0.490003645, 0.891703606, -0.0720738247, -0.46222052, 0.261393607, -0.984839082, -0.424829036],
        (true, "gelqf22_q") => &[0.0, -1.0, -1.0, 0.0],
        (true, "gelqf22_l") => &[-1.0, 0.0, 0.0, -1.0],
        (true, "gelqf22_grad") => &[-2.37199998, -0.479000002, 0.611999989, -0.427000046],
        (true, "gelqf23z_q") => &[1.0, 0.0, 0.0, 0.0, -0.554700255, -0.832050383],
        (true, "gelqf23z_l") => &[0.0, 0.0, 1.0, -3.60555124],
        (true, "syevd3_u") => &[0.764760554, 0.559123456, -0.320190459, 0.642490804, -0.624402463, 0.444215149, -0.0484434068, 0.545437574, 0.83675009],
        (true, "syevd3_lam") => &[1.05955052, 3.31754422, 4.62290525],
        (true, "syevd3_grad") => &[0.357454896, -0.0100132124, 0.308495194, -0.0100132013, 0.0427283123, -0.84244746, 0.308495194, -0.84244746, 0.239816904],
        (true, "syevd4_u") => &[-0.169635355, 0.930967689, -0.248794973, -0.206455752, 0.389423817, 0.305604845, 0.868810296, 0.0111051053, 0.820680857, -0.0433857627, -0.346812338, -0.45201993, 0.382172674, 0.194993258, -0.250980169, 0.867715657],
        (true, "syevd4_lam") => &[-3.81281471, 0.33699128, 4.51692247, 6.95890045],
        (true, "syevd4_grad") => &[-0.262755632, -0.0362553224, 0.734465122, -0.0769373327, -0.0362553298, 0.280428737, 0.0278657675, -0.248019367, 0.734465003, 0.0278657824, 0.498768508, -0.0294311699, -0.0769373253, -0.248019382, -0.0294311773, -0.582441688],
        (true, "syevd5_u") => &[-0.454700321, -0.102268606, 0.665081561, -0.00455272198, 0.583467722, -0.0878240839, 0.992076874, 0.078321524, 0.0407880917, 0.0164879914, 0.698670328, 0.0578113981, -0.126562834, 0.0585668236, 0.69933486, 0.0238414798, -0.0444544815, 0.0920849144, 0.990707994, -0.086447075, 0.544816911, 0.00237808819, 0.72597152, -0.115684271, -0.403424531],
        (true, "syevd5_lam") => &[-8.77987003, -6.01480293, -0.00652746065, 5.90851927, 8.29268074],
        (true, "syevd5_grad") => &[0.0759249926, -0.128731579, 0.167737365, -0.157763273, -0.61039114, -0.128731593, 0.826894224, 0.130853698, 0.0470930971, 0.0141780963, 0.16773735, 0.130853683, 0.536806583, -0.235615566, -0.0452863649, -0.157763258, 0.0470930971, -0.235615566, -0.629132986, 0.249930322, -0.6103912, 0.0141780982, -0.0452863723, 0.249930337, -0.0824929848],
        _ => panic!("unknown expected {key}"),
    }
}

//! `fastmath`'s float32 `exp`, `tanh` and `sigmoid` eight lanes at a time, for CPUs with
//! AVX2 and FMA: the same range reduction, polynomials and cut-over as the scalar forms.
//!
//! The compiler does not vectorise the scalar forms inside loops that compute several of
//! them (the recurrent cells), so the hot loops call these directly.

#[cfg(target_arch = "x86_64")]
pub use imp::*;

/// True if the CPU runs AVX2 and FMA, which every function here needs.
#[inline]
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::*;

    /// `e^x` per lane, as `fastmath::exp_f32`: `2^k · e^r` with `e^r` by its Taylor series.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn exp8(x: __m256) -> __m256 {
        // `max` returns its second operand for a NaN lane, so NaN stays NaN.
        let x = _mm256_min_ps(
            _mm256_set1_ps(88.3),
            _mm256_max_ps(_mm256_set1_ps(-87.3), x),
        );
        let k = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
        );
        let r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693_145_75), x);
        let r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428_606_8e-6), r);
        let mut p = _mm256_set1_ps(1.0 / 720.0);
        for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_cvtps_epi32(k),
            _mm256_set1_epi32(127),
        ));
        _mm256_mul_ps(p, _mm256_castsi256_ps(bits))
    }

    /// `tanh(x)` per lane, as `fastmath::tanh_f32`: the odd series below 0.25 in magnitude,
    /// `(1 - e^-2|x|) / (1 + e^-2|x|)` with the sign of `x` above.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn tanh8(x: __m256) -> __m256 {
        let sign = _mm256_set1_ps(-0.0);
        let a = _mm256_andnot_ps(sign, x);
        let x2 = _mm256_mul_ps(x, x);
        let mut s = _mm256_set1_ps(62.0 / 2835.0);
        for c in [-17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0, 1.0] {
            s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(c));
        }
        let small = _mm256_mul_ps(x, s);
        let e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0), a));
        let one = _mm256_set1_ps(1.0);
        let big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
        let big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
        let is_small = _mm256_cmp_ps::<_CMP_LT_OQ>(a, _mm256_set1_ps(0.25));
        _mm256_blendv_ps(big, small, is_small)
    }

    /// `1 / (1 + e^-x)` per lane.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn sigmoid8(x: __m256) -> __m256 {
        let one = _mm256_set1_ps(1.0);
        let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_div_ps(one, _mm256_add_ps(one, e))
    }

    /// Eight lanes of `v` from `at`.
    ///
    /// # Safety
    /// `at + 8 <= v.len()`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn load(v: &[f32], at: usize) -> __m256 {
        debug_assert!(at + 8 <= v.len());
        unsafe { _mm256_loadu_ps(v.as_ptr().add(at)) }
    }

    /// Writes eight lanes into `v` from `at`.
    ///
    /// # Safety
    /// `at + 8 <= v.len()`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn store(v: &mut [f32], at: usize, x: __m256) {
        debug_assert!(at + 8 <= v.len());
        unsafe { _mm256_storeu_ps(v.as_mut_ptr().add(at), x) }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::kernels::cpu::fastmath::{exp_f32, tanh_f32, FastMath};

    #[derive(Clone, Copy)]
    enum Func {
        Exp,
        Tanh,
        Sigmoid,
    }

    /// `f` over `xs`, eight lanes at a time (`xs.len()` a multiple of 8).
    #[target_feature(enable = "avx2,fma")]
    fn lanes(xs: &[f32], f: Func) -> Vec<f32> {
        let mut out = vec![0.0; xs.len()];
        for k in (0..xs.len() / 8).map(|b| b * 8) {
            // SAFETY: `k + 8 <= len` for both slices.
            let x = unsafe { load(xs, k) };
            let y = match f {
                Func::Exp => exp8(x),
                Func::Tanh => tanh8(x),
                Func::Sigmoid => sigmoid8(x),
            };
            unsafe { store(&mut out, k, y) };
        }
        out
    }

    fn run(xs: &[f32], f: Func) -> Vec<f32> {
        // SAFETY: callers check `available()` first.
        unsafe { lanes(xs, f) }
    }

    fn check(f: Func, scalar: fn(f32) -> f32, lo: f32, hi: f32) {
        let xs: Vec<f32> = (0..8000)
            .map(|i| lo + (hi - lo) * i as f32 / 8000.0)
            .collect();
        for (x, v) in xs.iter().zip(run(&xs, f)) {
            let s = scalar(*x);
            let tol = 4.0 * f32::EPSILON * s.abs().max(f32::MIN_POSITIVE);
            assert!((v - s).abs() <= tol, "at {x}: {v} against {s}");
        }
    }

    #[test]
    fn lanes_agree_with_the_scalar_forms() {
        if !available() {
            return;
        }
        check(Func::Exp, exp_f32, -100.0, 100.0);
        check(Func::Tanh, tanh_f32, -12.0, 12.0);
        check(Func::Sigmoid, |v| v.fast_sigmoid(), -30.0, 30.0);
    }

    #[test]
    fn nan_and_infinities_pass_through_as_in_the_scalar_forms() {
        if !available() {
            return;
        }
        let xs = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            1e-20,
            30.0,
            -30.0,
        ];
        let t = run(&xs, Func::Tanh);
        assert!(t[0].is_nan());
        assert_eq!(&t[1..], &[1.0, -1.0, 0.0, -0.0, 1e-20, 1.0, -1.0]);
        assert!(t[4].is_sign_negative());
        let e = run(&xs, Func::Exp);
        assert!(e[0].is_nan());
        // Infinities are clamped to the finite range's ends, as in the scalar form.
        for (v, s) in [
            (e[1], exp_f32(f32::INFINITY)),
            (e[2], exp_f32(f32::NEG_INFINITY)),
        ] {
            assert!(
                v.is_finite() && (v - s).abs() <= 4.0 * f32::EPSILON * s,
                "{v} against {s}"
            );
        }
        assert_eq!(e[3], 1.0);
    }
}

//! Branch-free `exp`, `tanh` and `sigmoid` for float32 that the compiler can vectorise,
//! accurate to a few units in the last place; float64 uses the standard library.

use num_traits::Float;

/// Transcendental functions fast enough for the training hot path.
pub trait FastMath: Float {
    /// `e^x`.
    fn fast_exp(self) -> Self;
    /// `tanh(x)`.
    fn fast_tanh(self) -> Self;
    /// `1 / (1 + e^-x)`.
    fn fast_sigmoid(self) -> Self;
}

impl FastMath for f64 {
    #[inline(always)]
    fn fast_exp(self) -> f64 {
        self.exp()
    }

    #[inline(always)]
    fn fast_tanh(self) -> f64 {
        self.tanh()
    }

    #[inline(always)]
    fn fast_sigmoid(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
}

impl FastMath for f32 {
    #[inline(always)]
    fn fast_exp(self) -> f32 {
        exp_f32(self)
    }

    #[inline(always)]
    fn fast_tanh(self) -> f32 {
        tanh_f32(self)
    }

    #[inline(always)]
    fn fast_sigmoid(self) -> f32 {
        1.0 / (1.0 + exp_f32(-self))
    }
}

/// `e^x` as `2^k · e^r` with `k` the nearest integer to `x / ln 2` and `|r| ≤ ln 2 / 2`,
/// `e^r` by its Taylor series to the 6th power (truncation error below 1.2e-7).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // Beyond these, e^x is 0 or overflows; clamping keeps the exponent bits in range.
    let x = x.clamp(-87.3, 88.3);
    // Adding and removing 1.5 · 2^23 rounds to the nearest integer without a rounding
    // instruction, so the loop vectorises on any x86-64.
    const ROUND: f32 = 12_582_912.0;
    let k = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    // ln 2 split in two so that k · LN2_HI is exact.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((k as i32 + 127) as u32) << 23);
    p * scale
}

/// `tanh(x)`: its odd Taylor series near 0 (where `1 - e^-2|x|` would cancel), else
/// `(1 - e^-2|x|) / (1 + e^-2|x|)` with the sign of `x`.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let x2 = x * x;
    let small = x
        * (1.0
            + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))));
    let e = exp_f32(-2.0 * a);
    let big = ((1.0 - e) / (1.0 + e)).copysign(x);
    if a < 0.25 {
        small
    } else {
        big
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f64) -> f64 {
        let err = (a as f64 - b).abs();
        let ulp = (b.abs() as f32).max(f32::MIN_POSITIVE) as f64 * f32::EPSILON as f64;
        err / ulp
    }

    #[test]
    fn exp_is_accurate() {
        let mut worst: f64 = 0.0;
        let mut x = -80.0f32;
        while x < 80.0 {
            worst = worst.max(ulps(exp_f32(x), (x as f64).exp()));
            x += 0.0137;
        }
        assert!(worst < 4.0, "exp error {worst} ulps");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-1000.0), exp_f32(-87.3));
        assert!(exp_f32(1000.0).is_finite());
    }

    #[test]
    fn tanh_and_sigmoid_are_accurate() {
        let mut worst_t: f64 = 0.0;
        let mut worst_s: f64 = 0.0;
        let mut x = -12.0f32;
        while x < 12.0 {
            let t = (x as f64).tanh();
            let err = (tanh_f32(x) as f64 - t).abs();
            worst_t = worst_t.max(err / t.abs().max(1e-30));
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            worst_s = worst_s.max(((x.fast_sigmoid()) as f64 - s).abs() / s);
            x += 0.00113;
        }
        assert!(worst_t < 5e-7, "tanh relative error {worst_t}");
        assert!(worst_s < 5e-7, "sigmoid relative error {worst_s}");
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(tanh_f32(30.0), 1.0);
        assert_eq!(tanh_f32(-30.0), -1.0);
        assert!((tanh_f32(1e-20) - 1e-20).abs() < 1e-30);
    }
}

//! Special functions of the element-wise operators (`erf`, `erfinv`, `gamma`, `gammaln`)
//! and their derivatives, in double precision: `libm` gives erf and the gamma functions,
//! the inverse error function and digamma are computed here.

use std::f64::consts::PI;

/// The error function.
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// The gamma function.
pub fn gamma(x: f64) -> f64 {
    libm::tgamma(x)
}

/// The logarithm of the gamma function's absolute value.
pub fn gammaln(x: f64) -> f64 {
    libm::lgamma(x)
}

/// The inverse error function: NaN outside [-1, 1], infinite at its ends.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return y * f64::INFINITY;
    }
    if y == 0.0 {
        return y;
    }
    // A closed-form first guess (Winitzki's), then Newton steps on erf(x) = y.
    const A: f64 = 0.147;
    let ln = (1.0 - y * y).ln();
    let t = 2.0 / (PI * A) + ln / 2.0;
    let mut x = y.signum() * ((t * t - ln / A).sqrt() - t).sqrt();
    let slope = 2.0 / PI.sqrt();
    for _ in 0..4 {
        let step = (erf(x) - y) / (slope * (-x * x).exp());
        if !step.is_finite() {
            break;
        }
        x -= step;
        if step.abs() <= 1e-15 * x.abs() {
            break;
        }
    }
    x
}

/// The digamma function, the derivative of `gammaln`.
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x < 0.0 {
        // Reflection: psi(x) = psi(1 - x) - pi / tan(pi x).
        return digamma(1.0 - x) - PI / (PI * x).tan();
    }
    let mut x = x;
    let mut acc = 0.0;
    while x < 10.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let r = 1.0 / (x * x);
    let series = r
        * (1.0 / 12.0
            - r * (1.0 / 120.0 - r * (1.0 / 252.0 - r * (1.0 / 240.0 - r * (1.0 / 132.0)))));
    acc + x.ln() - 0.5 / x - series
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfinv_inverts_erf() {
        for &x in &[-3.0, -1.2, -0.5, -1e-4, 0.0, 1e-6, 0.3, 0.9, 2.5] {
            let back = erfinv(erf(x));
            assert!((back - x).abs() < 1e-9 * (1.0 + x.abs()), "{x} -> {back}");
        }
        assert!(erfinv(1.5).is_nan());
        assert_eq!(erfinv(1.0), f64::INFINITY);
    }

    #[test]
    fn digamma_matches_known_values() {
        let euler = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + euler).abs() < 1e-12);
        assert!((digamma(0.5) + euler + 2.0 * 2f64.ln()).abs() < 1e-12);
        assert!((digamma(10.0) - 2.251_752_589_066_721).abs() < 1e-12);
        assert!((digamma(-0.5) - 0.036_489_973_978_576_5).abs() < 1e-10);
        assert!(digamma(-2.0).is_nan());
    }
}

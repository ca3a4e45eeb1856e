//! What a convolution's forward pass does to each output channel as it finishes it,
//! while the values are still in cache: add the bias, or, for a convolution fused with
//! the layers after it, scale and shift it (a BatchNorm folded in), add a residual and
//! apply a ReLU.

use super::wide::{self, Wide};
use crate::kernels::cpu::num::Num;
use pulp::{Simd, WithSimd};

/// `y = act(y · scale[f] + shift[f] + residual)` for the outputs of filter `f`; each part
/// is left out when absent.
pub(crate) struct Epilogue<'a, T> {
    pub scale: Option<&'a [T]>,
    /// The bias, or a folded BatchNorm's shift.
    pub shift: Option<&'a [T]>,
    /// An array of the output's layout, added element by element.
    pub residual: Option<&'a [T]>,
    pub relu: bool,
}

impl<T> Clone for Epilogue<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Epilogue<'_, T> {}

impl<'a, T: Num> Epilogue<'a, T> {
    /// The plain layer's: the bias added, if there is one.
    pub fn bias(bias: Option<&'a [T]>) -> Self {
        Epilogue {
            scale: None,
            shift: bias,
            residual: None,
            relu: false,
        }
    }

    /// True if the epilogue adds a constant per channel at most, so that it may be
    /// applied once to a sum of products that were added to the output's old values.
    pub fn is_bias_only(&self) -> bool {
        self.scale.is_none() && self.residual.is_none() && !self.relu
    }

    /// The per-channel constant of a bias-only epilogue (zero without a bias).
    pub fn bias_of(&self, f: usize) -> T {
        debug_assert!(self.is_bias_only());
        self.shift.map_or(T::ZERO, |b| b[f])
    }

    /// True if the epilogue changes nothing.
    pub fn is_identity(&self) -> bool {
        self.is_bias_only() && self.shift.is_none()
    }

    /// As [`Epilogue::apply`], from inside a kernel already running on instruction set
    /// `s`: no dispatch per row, which costs as much as a short row's arithmetic.
    #[inline(always)]
    pub(super) fn apply_in<S: Simd>(&self, s: S, f: usize, at: usize, row: &mut [T])
    where
        T: Wide,
    {
        if self.is_identity() {
            return;
        }
        Apply {
            scale: self.scale.map_or(T::ONE, |v| v[f]),
            shift: self.shift.map_or(T::ZERO, |v| v[f]),
            residual: self.residual.map(|r| &r[at..at + row.len()]),
            row,
            relu: self.relu,
        }
        .with_simd(s);
    }

    /// Applies the epilogue of filter `f` to `row`, elements `at..at + row.len()` of the
    /// whole output.
    #[inline]
    pub fn apply(&self, f: usize, at: usize, row: &mut [T]) {
        if self.is_identity() {
            return;
        }
        let scale = self.scale.map_or(T::ONE, |s| s[f]);
        let shift = self.shift.map_or(T::ZERO, |s| s[f]);
        let residual = self.residual.map(|r| &r[at..at + row.len()]);
        if let Some(row) = wide::cast_mut::<T, f32>(row) {
            let residual = residual.map(|r| wide::cast::<T, f32>(r).expect("one element type"));
            return pulp::Arch::new().dispatch(Apply::<f32> {
                row,
                scale: cast_one(scale),
                shift: cast_one(shift),
                residual,
                relu: self.relu,
            });
        }
        if let Some(row) = wide::cast_mut::<T, f64>(row) {
            let residual = residual.map(|r| wide::cast::<T, f64>(r).expect("one element type"));
            return pulp::Arch::new().dispatch(Apply::<f64> {
                row,
                scale: cast_one(scale),
                shift: cast_one(shift),
                residual,
                relu: self.relu,
            });
        }
        for (i, v) in row.iter_mut().enumerate() {
            let mut y = v.mul(scale).add(shift);
            if let Some(r) = residual {
                y = y.add(r[i]);
            }
            *v = if self.relu { relu(y) } else { y };
        }
    }
}

/// `v` as the same value of type `E`, `T` being `E`.
fn cast_one<T: 'static + Copy, E: 'static + Copy>(v: T) -> E {
    wide::cast::<T, E>(std::slice::from_ref(&v)).expect("one element type")[0]
}

/// ReLU that keeps NaN, as the `relu` operator does.
#[inline(always)]
fn relu<T: Num>(v: T) -> T {
    if v < T::ZERO {
        T::ZERO
    } else {
        v
    }
}

/// One row's epilogue in float32 or float64.
struct Apply<'a, E> {
    row: &'a mut [E],
    scale: E,
    shift: E,
    residual: Option<&'a [E]>,
    relu: bool,
}

impl<E: Wide + Num> WithSimd for Apply<'_, E> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Apply {
            row,
            scale,
            shift,
            residual,
            relu,
        } = self;
        let (sv, tv) = (E::splat(s, scale), E::splat(s, shift));
        let wd = E::width::<S>();
        let n = row.len();
        let mut i = 0;
        while i < n {
            let whole = i + wd <= n;
            let part = &mut row[i..n.min(i + wd)];
            let v = if whole {
                wide::load::<E, S>(part)
            } else {
                E::load_part(s, part)
            };
            let mut y = E::mul_add(s, v, sv, tv);
            if let Some(r) = residual {
                let r = &r[i..n.min(i + wd)];
                let rv = if whole {
                    wide::load::<E, S>(r)
                } else {
                    E::load_part(s, r)
                };
                y = <E as Wide>::add(s, y, rv);
            }
            if relu {
                y = E::relu(s, y);
            }
            if whole {
                wide::store::<E, S>(part, y);
            } else {
                E::store_part(s, part, y);
            }
            i += wd;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Epilogue;

    fn reference(e: &Epilogue<'_, f64>, f: usize, at: usize, row: &[f64]) -> Vec<f64> {
        row.iter()
            .enumerate()
            .map(|(i, &v)| {
                let mut y = v * e.scale.map_or(1.0, |s| s[f]) + e.shift.map_or(0.0, |s| s[f]);
                y += e.residual.map_or(0.0, |r| r[at + i]);
                if e.relu && y < 0.0 {
                    0.0
                } else {
                    y
                }
            })
            .collect()
    }

    #[test]
    fn every_combination_matches_the_scalar_formula_at_every_length() {
        let scale = [0.5, -2.0];
        let shift = [0.25, 1.5];
        let residual: Vec<f64> = (0..80).map(|i| (i as f64 * 0.7).sin()).collect();
        for len in [0, 1, 7, 8, 15, 16, 17, 33, 40] {
            let row: Vec<f64> = (0..len).map(|i| (i as f64 * 1.3).cos() * 3.0).collect();
            for mask in 0..16 {
                let e = Epilogue {
                    scale: (mask & 1 != 0).then_some(&scale[..]),
                    shift: (mask & 2 != 0).then_some(&shift[..]),
                    residual: (mask & 4 != 0).then_some(&residual[..]),
                    relu: mask & 8 != 0,
                };
                let want = reference(&e, 1, 5, &row);
                let mut got = row.clone();
                e.apply(1, 5, &mut got);
                assert_eq!(got, want, "len {len}, parts {mask:04b}");
                let e32 = Epilogue {
                    scale: e.scale.map(|_| &[0.5f32, -2.0][..]),
                    shift: e.shift.map(|_| &[0.25f32, 1.5][..]),
                    residual: None,
                    relu: e.relu,
                };
                let mut got32: Vec<f32> = row.iter().map(|&v| v as f32).collect();
                e32.apply(1, 0, &mut got32);
                let want32 = reference(
                    &Epilogue {
                        residual: None,
                        ..e
                    },
                    1,
                    0,
                    &row,
                );
                for (g, w) in got32.iter().zip(&want32) {
                    assert!((*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()));
                }
            }
        }
    }

    #[test]
    fn relu_keeps_nan() {
        let mut row = [f32::NAN, -1.0, 2.0];
        Epilogue {
            scale: None,
            shift: None,
            residual: None,
            relu: true,
        }
        .apply(0, 0, &mut row);
        assert!(row[0].is_nan());
        assert_eq!(&row[1..], &[0.0, 2.0]);
    }
}

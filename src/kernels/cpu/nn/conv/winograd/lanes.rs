//! Elementwise maps from `I` runs to `O` runs of the same length, computed a whole
//! vector register at a time with explicit SIMD: the tile transforms read and write 16
//! or 20 streams at once, more than the compiler's own vectoriser will take on.

use super::super::wide::Wide;
use crate::kernels::cpu::num::Num;
use pulp::{Simd, WithSimd};
use std::any::TypeId;

/// A map from `I` values to `O` values, applied lane by lane to whole vectors.
pub(super) trait LaneMap<const I: usize, const O: usize>: Sync {
    fn apply<E: Wide, S: Simd>(&self, s: S, x: [E::V<S>; I]) -> [E::V<S>; O];
}

/// `outs[o][t] = map([ins[0][t], …])[o]` for every `t < n`, on float32 or float64 `T`.
///
/// # Panics
/// On other element types, which F(2×2, 3×3) never runs on, and on runs shorter than
/// `n`.
pub(super) fn lanes<T: Num, M: LaneMap<I, O>, const I: usize, const O: usize>(
    n: usize,
    ins: [&[T]; I],
    outs: [&mut [T]; O],
    map: &M,
) {
    fn cast<T: 'static, E: 'static>(x: &[T]) -> &[E] {
        assert_eq!(TypeId::of::<T>(), TypeId::of::<E>());
        // SAFETY: `T` and `E` are the same type (checked above).
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) }
    }
    fn cast_mut<T: 'static, E: 'static>(x: &mut [T]) -> &mut [E] {
        assert_eq!(TypeId::of::<T>(), TypeId::of::<E>());
        // SAFETY: `T` and `E` are the same type (checked above).
        unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len()) }
    }
    let arch = pulp::Arch::new();
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        let (ins, outs) = (ins.map(cast::<T, f32>), outs.map(cast_mut::<T, f32>));
        arch.dispatch(Run { n, ins, outs, map });
    } else if TypeId::of::<T>() == TypeId::of::<f64>() {
        let (ins, outs) = (ins.map(cast::<T, f64>), outs.map(cast_mut::<T, f64>));
        arch.dispatch(Run { n, ins, outs, map });
    } else {
        unreachable!("F(2×2, 3×3) runs on float32 and float64 only");
    }
}

/// One call of [`lanes`], on element type `E`.
struct Run<'a, E, M, const I: usize, const O: usize> {
    n: usize,
    ins: [&'a [E]; I],
    outs: [&'a mut [E]; O],
    map: &'a M,
}

impl<E: Wide, M: LaneMap<I, O>, const I: usize, const O: usize> WithSimd for Run<'_, E, M, I, O> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Run { n, ins, outs, map } = self;
        assert!(
            ins.iter().all(|x| x.len() >= n) && outs.iter().all(|x| x.len() >= n),
            "runs shorter than the map"
        );
        let w = E::width::<S>();
        let full = n / w * w;
        // Plain loops over the arrays: closures would be compiled apart from the vector
        // instruction set.
        let mut x = [E::splat(s, E::of(0.0)); I];
        for t in (0..full).step_by(w) {
            for i in 0..I {
                // SAFETY: `t + w <= n`, within every run (checked above); the vectors are
                // plain arrays of `E`, read and written unaligned.
                x[i] = unsafe { ins[i].as_ptr().add(t).cast::<E::V<S>>().read_unaligned() };
            }
            let y = map.apply::<E, S>(s, x);
            for o in 0..O {
                // SAFETY: as for the reads.
                unsafe {
                    outs[o]
                        .as_mut_ptr()
                        .add(t)
                        .cast::<E::V<S>>()
                        .write_unaligned(y[o])
                };
            }
        }
        if full < n {
            for i in 0..I {
                x[i] = E::load_part(s, &ins[i][full..n]);
            }
            let y = map.apply::<E, S>(s, x);
            for o in 0..O {
                E::store_part(s, &mut outs[o][full..n], y[o]);
            }
        }
    }
}

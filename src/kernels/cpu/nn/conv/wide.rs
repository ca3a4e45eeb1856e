//! The float types the convolution kernels compute with explicit SIMD, and their vector
//! operations for an instruction set chosen at run time (pulp's `Simd`).

use pulp::Simd;

/// The element types the maps run on, with their vectors for an instruction set `S`.
pub(super) trait Wide: Copy + 'static {
    type V<S: Simd>: Copy;
    fn width<S: Simd>() -> usize;
    fn of(v: f64) -> Self;
    fn add<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    fn sub<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>) -> Self::V<S>;
    /// `a · b + c`, fused where the instruction set has it.
    fn mul_add<S: Simd>(s: S, a: Self::V<S>, b: Self::V<S>, c: Self::V<S>) -> Self::V<S>;
    fn splat<S: Simd>(s: S, v: Self) -> Self::V<S>;
    /// `max(v, 0)` lane by lane, keeping NaN.
    fn relu<S: Simd>(s: S, v: Self::V<S>) -> Self::V<S>;
    /// The first `x.len()` (at most a vector's width) lanes from `x`, the rest zero.
    fn load_part<S: Simd>(s: S, x: &[Self]) -> Self::V<S>;
    /// The first `x.len()` (at most a vector's width) lanes into `x`.
    fn store_part<S: Simd>(s: S, x: &mut [Self], v: Self::V<S>);
}

macro_rules! wide {
    ($t:ty, $lanes:ident, $v:ident, $add:ident, $sub:ident, $fma:ident, $splat:ident, $less:ident, $select:ident, $load:ident, $store:ident) => {
        impl Wide for $t {
            type V<S: Simd> = S::$v;
            #[inline(always)]
            fn width<S: Simd>() -> usize {
                S::$lanes
            }
            #[inline(always)]
            fn of(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn add<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$add(a, b)
            }
            #[inline(always)]
            fn sub<S: Simd>(s: S, a: S::$v, b: S::$v) -> S::$v {
                s.$sub(a, b)
            }
            #[inline(always)]
            fn mul_add<S: Simd>(s: S, a: S::$v, b: S::$v, c: S::$v) -> S::$v {
                s.$fma(a, b, c)
            }
            #[inline(always)]
            fn splat<S: Simd>(s: S, v: $t) -> S::$v {
                s.$splat(v)
            }
            #[inline(always)]
            fn relu<S: Simd>(s: S, v: S::$v) -> S::$v {
                let zero = s.$splat(0.0);
                s.$select(s.$less(v, zero), zero, v)
            }
            #[inline(always)]
            fn load_part<S: Simd>(s: S, x: &[$t]) -> S::$v {
                s.$load(x)
            }
            #[inline(always)]
            fn store_part<S: Simd>(s: S, x: &mut [$t], v: S::$v) {
                s.$store(x, v)
            }
        }
    };
}

wide!(
    f32,
    F32_LANES,
    f32s,
    add_f32s,
    sub_f32s,
    mul_add_e_f32s,
    splat_f32s,
    less_than_f32s,
    select_f32s,
    partial_load_f32s,
    partial_store_f32s
);
wide!(
    f64,
    F64_LANES,
    f64s,
    add_f64s,
    sub_f64s,
    mul_add_e_f64s,
    splat_f64s,
    less_than_f64s,
    select_f64s,
    partial_load_f64s,
    partial_store_f64s
);

/// A whole vector from the first lanes of `x`.
///
/// # Panics
/// If `x` is shorter than a vector.
#[inline(always)]
pub(super) fn load<E: Wide, S: Simd>(x: &[E]) -> E::V<S> {
    assert!(x.len() >= E::width::<S>());
    // SAFETY: the vector is a plain array of `E` no longer than `x` (checked above), read
    // unaligned.
    unsafe { x.as_ptr().cast::<E::V<S>>().read_unaligned() }
}

/// A whole vector into the first lanes of `x`.
///
/// # Panics
/// If `x` is shorter than a vector.
#[inline(always)]
pub(super) fn store<E: Wide, S: Simd>(x: &mut [E], v: E::V<S>) {
    assert!(x.len() >= E::width::<S>());
    // SAFETY: as for `load`.
    unsafe { x.as_mut_ptr().cast::<E::V<S>>().write_unaligned(v) }
}

/// `x` as a slice of `E`, if `T` is `E`.
pub(super) fn cast<T: 'static, E: 'static>(x: &[T]) -> Option<&[E]> {
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<E>()).then(|| {
        // SAFETY: `T` and `E` are the same type (checked above).
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) }
    })
}

/// `x` as a mutable slice of `E`, if `T` is `E`.
pub(super) fn cast_mut<T: 'static, E: 'static>(x: &mut [T]) -> Option<&mut [E]> {
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<E>()).then(|| {
        // SAFETY: `T` and `E` are the same type (checked above).
        unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len()) }
    })
}

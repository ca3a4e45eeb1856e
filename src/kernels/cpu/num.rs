//! Arithmetic on every numeric element type, with numpy's integer semantics (wrapping,
//! division by zero gives zero) and float16 computed through float32.

use crate::dtype::Element;
use half::f16;

/// A numeric element type that kernels compute with.
pub trait Num: Element {
    const ZERO: Self;
    const ONE: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// Python-style modulo: the result has the sign of the divisor; zero for a zero divisor.
    fn rem(self, o: Self) -> Self;
    fn pow(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn max_of(self, o: Self) -> Self;
    fn min_of(self, o: Self) -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn is_nan(self) -> bool;
    /// Converts from another element type.
    #[inline(always)]
    fn cast_from<U: Element>(u: U) -> Self {
        Self::from_f64(u.to_f64())
    }
}

macro_rules! impl_float {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn rem(self, o: Self) -> Self {
                if o == 0.0 {
                    return 0.0;
                }
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) {
                    r + o
                } else {
                    r
                }
            }
            #[inline(always)]
            fn pow(self, o: Self) -> Self {
                self.powf(o)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn max_of(self, o: Self) -> Self {
                if self > o || self.is_nan() {
                    self
                } else {
                    o
                }
            }
            #[inline(always)]
            fn min_of(self, o: Self) -> Self {
                if self < o || self.is_nan() {
                    self
                } else {
                    o
                }
            }
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
            fn highest() -> Self {
                <$t>::INFINITY
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                self != self
            }
        }
    };
}
impl_float!(f32);
impl_float!(f64);

macro_rules! impl_int {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            #[inline(always)]
            fn rem(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(o);
                #[allow(unused_comparisons)]
                if r != 0 && ((r < 0) != (o < 0)) {
                    r.wrapping_add(o)
                } else {
                    r
                }
            }
            #[inline(always)]
            fn pow(self, o: Self) -> Self {
                #[allow(unused_comparisons)]
                if o < 0 {
                    return if self == 1 { 1 } else { 0 };
                }
                self.wrapping_pow(o as u32)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                (0 as $t).wrapping_sub(self)
            }
            #[inline(always)]
            fn max_of(self, o: Self) -> Self {
                if self > o {
                    self
                } else {
                    o
                }
            }
            #[inline(always)]
            fn min_of(self, o: Self) -> Self {
                if self < o {
                    self
                } else {
                    o
                }
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
        }
    };
}
impl_int!(u8);
impl_int!(i8);
impl_int!(i32);
impl_int!(i64);

impl Num for f16 {
    const ZERO: Self = f16::ZERO;
    const ONE: Self = f16::ONE;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        f16::from_f32(self.to_f32() + o.to_f32())
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        f16::from_f32(self.to_f32() - o.to_f32())
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        f16::from_f32(self.to_f32() * o.to_f32())
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        f16::from_f32(self.to_f32() / o.to_f32())
    }
    #[inline(always)]
    fn rem(self, o: Self) -> Self {
        f16::from_f32(self.to_f32().rem(o.to_f32()))
    }
    #[inline(always)]
    fn pow(self, o: Self) -> Self {
        f16::from_f32(self.to_f32().powf(o.to_f32()))
    }
    #[inline(always)]
    fn neg(self) -> Self {
        -self
    }
    #[inline(always)]
    fn max_of(self, o: Self) -> Self {
        if self > o || self.is_nan() {
            self
        } else {
            o
        }
    }
    #[inline(always)]
    fn min_of(self, o: Self) -> Self {
        if self < o || self.is_nan() {
            self
        } else {
            o
        }
    }
    fn lowest() -> Self {
        f16::NEG_INFINITY
    }
    fn highest() -> Self {
        f16::INFINITY
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f16::is_nan(self)
    }
}

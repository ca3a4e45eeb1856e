//! Element types with MXNet's type flags, and the Rust types behind them.

use crate::error::{Error, Result};
use half::f16;

/// An element type; the discriminant is MXNet's `type_flag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32 = 0,
    F64 = 1,
    F16 = 2,
    U8 = 3,
    I32 = 4,
    I8 = 5,
    I64 = 6,
    Bool = 7,
}

impl DType {
    /// All types, in flag order.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::U8,
        DType::I32,
        DType::I8,
        DType::I64,
        DType::Bool,
    ];

    /// The type for MXNet's flag.
    pub fn from_flag(flag: i32) -> Result<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| *d as i32 == flag)
            .ok_or_else(|| Error::Type(format!("unknown dtype flag {flag}")))
    }

    /// MXNet's flag.
    pub fn flag(self) -> i32 {
        self as i32
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::F16 => 2,
            DType::U8 | DType::I8 | DType::Bool => 1,
        }
    }

    /// numpy's name for the type.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I8 => "int8",
            DType::I64 => "int64",
            DType::Bool => "bool",
        }
    }

    /// The type for a numpy-style name (`float32`, `int64`, ...).
    pub fn from_name(name: &str) -> Result<DType> {
        let d = match name {
            "float32" | "float" | "f4" | "<f4" => DType::F32,
            "float64" | "double" | "f8" | "<f8" => DType::F64,
            "float16" | "half" | "f2" | "<f2" => DType::F16,
            "uint8" | "u1" | "|u1" => DType::U8,
            "int32" | "i4" | "<i4" => DType::I32,
            "int8" | "i1" | "|i1" => DType::I8,
            "int64" | "i8" | "<i8" => DType::I64,
            "bool" | "|b1" => DType::Bool,
            _ => return Err(Error::Type(format!("unsupported dtype '{name}'"))),
        };
        Ok(d)
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be an element of an NDArray.
pub trait Element: Copy + Send + Sync + 'static + Default + PartialOrd + std::fmt::Debug {
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

macro_rules! impl_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
impl_element!(f32, DType::F32);
impl_element!(f64, DType::F64);
impl_element!(u8, DType::U8);
impl_element!(i32, DType::I32);
impl_element!(i8, DType::I8);
impl_element!(i64, DType::I64);

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
}

// The dtype dispatch macros: each runs a body with a type alias bound to the Rust type of
// a runtime dtype, over all dtypes, the numeric ones or the floating-point ones. A dtype
// outside the set is a type error naming the operator.

/// The common arm list behind the `dispatch_*` macros; without `$op`, the list must
/// cover every dtype.
#[doc(hidden)]
#[macro_export]
macro_rules! dispatch_over {
    ($dtype:expr, $T:ident => $body:expr; [$($v:ident => $t:ty),*]) => {
        match $dtype {
            $($crate::dtype::DType::$v => {
                type $T = $t;
                $body
            })*
        }
    };
    ($dtype:expr, $T:ident => $body:expr; [$($v:ident => $t:ty),*]; $op:expr) => {
        match $dtype {
            $($crate::dtype::DType::$v => {
                type $T = $t;
                $body
            })*
            #[allow(unreachable_patterns)]
            other => {
                return Err($crate::error::Error::Type(format!(
                    "{}: dtype {} is not supported",
                    $op, other
                )))
            }
        }
    };
}

/// Runs `$body` with `$T` bound to the Rust type of `$dtype` (every dtype).
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::dispatch_over!($dtype, $T => $body; [
            F32 => f32, F64 => f64, F16 => half::f16, U8 => u8, I32 => i32, I8 => i8,
            I64 => i64, Bool => bool
        ])
    };
}

/// Runs `$body` with `$T` bound to the Rust type of a numeric `$dtype`; bool is a type
/// error naming `$op`.
#[macro_export]
macro_rules! dispatch_num {
    ($op:expr, $dtype:expr, $T:ident => $body:expr) => {
        $crate::dispatch_over!($dtype, $T => $body;
            [F32 => f32, F64 => f64, F16 => half::f16, U8 => u8, I32 => i32, I8 => i8, I64 => i64];
            $op)
    };
}

/// Runs `$body` with `$T` bound to the Rust type of a floating-point `$dtype` and, in the
/// second form, `$F` to the type it is computed in (float32 for float16); other dtypes are
/// a type error naming `$op`.
#[macro_export]
macro_rules! dispatch_float {
    ($op:expr, $dtype:expr, $T:ident => $body:expr) => {
        $crate::dispatch_over!($dtype, $T => $body; [F32 => f32, F64 => f64, F16 => half::f16]; $op)
    };
    ($op:expr, $dtype:expr, $T:ident, $F:ident => $body:expr) => {
        $crate::dispatch_over!($dtype, $T => {
            #[allow(dead_code)]
            type $F = <$T as $crate::dtype::ComputeType>::Compute;
            $body
        }; [F32 => f32, F64 => f64, F16 => half::f16]; $op)
    };
}

/// Runs `$body` with `$I` and `$O` bound to the Rust types of two floating-point dtypes
/// and `$F` to the type to compute in (float64 if either is, float32 otherwise).
#[macro_export]
macro_rules! dispatch_float_pair {
    ($op:expr, $it:expr, $ot:expr, $I:ident, $O:ident, $F:ident => $body:expr) => {
        $crate::dispatch_float!($op, $it, $I => {
            $crate::dispatch_float!($op, $ot, $O => {
                if $it == $crate::dtype::DType::F64 || $ot == $crate::dtype::DType::F64 {
                    type $F = f64;
                    $body
                } else {
                    type $F = f32;
                    $body
                }
            })
        })
    };
}

/// The type a floating-point storage type is computed in: itself, or float32 for float16.
pub trait ComputeType {
    /// The compute type.
    type Compute;
}

impl ComputeType for f32 {
    type Compute = f32;
}

impl ComputeType for f64 {
    type Compute = f64;
}

impl ComputeType for half::f16 {
    type Compute = f32;
}

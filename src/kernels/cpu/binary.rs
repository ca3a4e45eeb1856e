//! Element-wise binary operators: same-shape (`elemwise_*`), broadcasting (`broadcast_*`)
//! and with a scalar (`_plus_scalar`, ...).

use super::grad::binary::BinaryBackward;
use super::grad::elemwise::ScalarBackward;
use super::map::{map1, map2_broadcast, map2_broadcast_inplace, map_inplace};
use super::num::Num;
use super::unary::{unary_op, UnaryKind};
use crate::dispatch_num;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::{InOut, TBlob};
use crate::op::infer;
use crate::op::{
    check_inputs, Attrs, Grad, Gradient, OpContext, OpDef, OpRef, OpReq, Operator, ParamList,
    Params, Registry,
};
use crate::shape::{broadcast_shapes, fmt_shape, Shape};
use std::sync::Arc;

/// The element-wise functions of two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryKind {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Power,
    Maximum,
    Minimum,
    Hypot,
    Equal,
    NotEqual,
    Greater,
    GreaterEqual,
    Lesser,
    LesserEqual,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
}

#[inline(always)]
fn truth<T: Num>(b: bool) -> T {
    if b {
        T::ONE
    } else {
        T::ZERO
    }
}

/// Runs `$body` with `$f` bound to the element function of `$kind` on `$T`.
macro_rules! with_binary_fn {
    ($kind:expr, $T:ty, $f:ident => $body:expr) => {{
        let z = <$T>::ZERO;
        match $kind {
            BinaryKind::Add => {
                let $f = |x: $T, y: $T| Num::add(x, y);
                $body
            }
            BinaryKind::Sub => {
                let $f = |x: $T, y: $T| Num::sub(x, y);
                $body
            }
            BinaryKind::Mul => {
                let $f = |x: $T, y: $T| Num::mul(x, y);
                $body
            }
            BinaryKind::Div => {
                let $f = |x: $T, y: $T| Num::div(x, y);
                $body
            }
            BinaryKind::Mod => {
                let $f = |x: $T, y: $T| Num::rem(x, y);
                $body
            }
            BinaryKind::Power => {
                let $f = |x: $T, y: $T| Num::pow(x, y);
                $body
            }
            BinaryKind::Maximum => {
                let $f = |x: $T, y: $T| Num::max_of(x, y);
                $body
            }
            BinaryKind::Minimum => {
                let $f = |x: $T, y: $T| Num::min_of(x, y);
                $body
            }
            BinaryKind::Hypot => {
                let $f = |x: $T, y: $T| {
                    <$T as Element>::from_f64(Element::to_f64(x).hypot(Element::to_f64(y)))
                };
                $body
            }
            BinaryKind::Equal => {
                let $f = |x: $T, y: $T| truth::<$T>(x == y);
                $body
            }
            BinaryKind::NotEqual => {
                let $f = |x: $T, y: $T| truth::<$T>(x != y);
                $body
            }
            BinaryKind::Greater => {
                let $f = |x: $T, y: $T| truth::<$T>(x > y);
                $body
            }
            BinaryKind::GreaterEqual => {
                let $f = |x: $T, y: $T| truth::<$T>(x >= y);
                $body
            }
            BinaryKind::Lesser => {
                let $f = |x: $T, y: $T| truth::<$T>(x < y);
                $body
            }
            BinaryKind::LesserEqual => {
                let $f = |x: $T, y: $T| truth::<$T>(x <= y);
                $body
            }
            BinaryKind::LogicalAnd => {
                let $f = |x: $T, y: $T| truth::<$T>(x != z && y != z);
                $body
            }
            BinaryKind::LogicalOr => {
                let $f = |x: $T, y: $T| truth::<$T>(x != z || y != z);
                $body
            }
            BinaryKind::LogicalXor => {
                let $f = |x: $T, y: $T| truth::<$T>((x != z) != (y != z));
                $body
            }
        }
    }};
}

/// `out = f(a, b)` with broadcasting.
#[allow(clippy::too_many_arguments)]
fn kernel<T: Num>(
    kind: BinaryKind,
    a: &[T],
    ash: &[usize],
    b: &[T],
    bsh: &[usize],
    out: &mut [T],
    osh: &[usize],
    req: OpReq,
) {
    with_binary_fn!(kind, T, f => map2_broadcast(a, ash, b, bsh, out, osh, req, f))
}

/// True if `x` is exactly the memory of `out` (an in-place operand).
fn is_out(x: &TBlob, out: &TBlob) -> bool {
    x.ptr() == out.ptr() && x.size() == out.size()
}

/// Computes `out = kind(a, b)` with broadcasting; an input that is the output itself is
/// read through the output (the in-place form).
pub fn apply(kind: BinaryKind, a: &TBlob, b: &TBlob, out: &TBlob, req: OpReq) -> Result<()> {
    let (osh, ash, bsh) = (&out.shape, &a.shape, &b.shape);
    match (is_out(a, out), is_out(b, out)) {
        (false, false) => dispatch_num!("binary", out.dtype, T => kernel::<T>(
            kind, a.slice(), ash, b.slice(), bsh, out.slice_mut(), osh, req
        )),
        (true, true) => dispatch_num!("binary", out.dtype, T => with_binary_fn!(kind, T, f => {
            let add = req == OpReq::Add;
            if req != OpReq::Null {
                map_inplace(out.slice_mut::<T>(), |v| if add { Num::add(v, f(v, v)) } else { f(v, v) })
            }
        })),
        (in_a, _) => {
            let other = if in_a { b } else { a };
            dispatch_num!("binary", out.dtype, T => with_binary_fn!(kind, T, f => {
                map2_broadcast_inplace(
                    out.slice_mut::<T>(), osh, other.slice::<T>(), &other.shape, !in_a, req, f
                )
            }))
        }
    }
    Ok(())
}

/// A binary operator on two arrays.
struct Binary {
    name: &'static str,
    kind: BinaryKind,
    broadcast: bool,
}

impl Operator for Binary {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, 2)?;
        if self.broadcast {
            Ok(vec![broadcast_shapes(self.name, &inputs[0], &inputs[1])?])
        } else if inputs[0] != inputs[1] {
            Err(Error::Value(format!(
                "{}: the two inputs must have the same shape, got {} and {}",
                self.name,
                fmt_shape(&inputs[0]),
                fmt_shape(&inputs[1])
            )))
        } else {
            Ok(vec![inputs[0].clone()])
        }
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0), (1, 0)]
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        if self.broadcast {
            if let [Some(a), Some(b)] = inputs {
                let out = broadcast_shapes(self.name, a, b)?;
                crate::op::assign_shape(self.name, "output 0", &mut outputs[0], &out)?;
            }
            return Ok(());
        }
        infer::same_shape(self.name, inputs, outputs)
    }

    fn infer_type_partial(
        &self,
        inputs: &mut [Option<DType>],
        outputs: &mut [Option<DType>],
    ) -> Result<()> {
        infer::same_type(self.name, inputs, outputs)
    }

    fn gradient(&self) -> Grad {
        let Some(bname) = backward_name(self.kind, self.broadcast) else {
            return Grad::Zero;
        };
        let op: OpRef = Arc::new(BinaryBackward {
            name: bname,
            kind: self.kind,
        });
        let plain_sum = matches!(self.kind, BinaryKind::Add | BinaryKind::Sub);
        if plain_sum && !self.broadcast {
            Gradient::simple(op, &[], &[], 2)
        } else {
            Gradient::simple(op, &[0, 1], &[], 2)
        }
    }
}

impl CpuKernel for Binary {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        apply(self.kind, &inputs[0], &inputs[1], &outputs[0], req[0])
    }
}

/// MXNet's name of the backward op, or `None` where the gradient is zero.
fn backward_name(kind: BinaryKind, broadcast: bool) -> Option<&'static str> {
    use BinaryKind as K;
    let names = match kind {
        K::Add => ("_backward_add", "_backward_broadcast_add"),
        K::Sub => ("_backward_sub", "_backward_broadcast_sub"),
        K::Mul => ("_backward_mul", "_backward_broadcast_mul"),
        K::Div => ("_backward_div", "_backward_broadcast_div"),
        K::Mod => ("_backward_mod", "_backward_broadcast_mod"),
        K::Power => ("_backward_power", "_backward_broadcast_power"),
        K::Maximum => ("_backward_maximum", "_backward_broadcast_maximum"),
        K::Minimum => ("_backward_minimum", "_backward_broadcast_minimum"),
        K::Hypot => ("_backward_hypot", "_backward_broadcast_hypot"),
        _ => return None,
    };
    Some(if broadcast { names.1 } else { names.0 })
}

/// A binary operator with a scalar operand.
struct Scalar {
    name: &'static str,
    kind: BinaryKind,
    /// True for `scalar op x` (`_rminus_scalar`, ...).
    reverse: bool,
    scalar: f64,
}

fn scalar_kernel<T: Num>(op: &Scalar, io: InOut<'_, T>, req: OpReq) {
    let s = T::from_f64(op.scalar);
    let one = [s];
    match io {
        InOut::Same(out) => {
            let n = [out.len()];
            map2_broadcast_inplace(
                out,
                &n,
                &one,
                &[1],
                op.reverse,
                req,
                |x: T, y: T| with_binary_fn!(op.kind, T, f => f(x, y)),
            )
        }
        InOut::Apart(x, out) => {
            if op.reverse {
                kernel(op.kind, &one, &[1], x, &[x.len()], out, &[x.len()], req)
            } else if op.kind == BinaryKind::Mul && req != OpReq::Add {
                map1(x, out, req, |v: T| v.mul(s))
            } else {
                kernel(op.kind, x, &[x.len()], &one, &[1], out, &[x.len()], req)
            }
        }
    }
}

impl Operator for Scalar {
    fn name(&self) -> &'static str {
        self.name
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(self.name, inputs, 1)?;
        Ok(vec![inputs[0].clone()])
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        infer::same_shape(self.name, inputs, outputs)
    }

    fn infer_type_partial(
        &self,
        inputs: &mut [Option<DType>],
        outputs: &mut [Option<DType>],
    ) -> Result<()> {
        infer::same_type(self.name, inputs, outputs)
    }

    fn gradient(&self) -> Grad {
        use BinaryKind as K;
        let s = self.scalar;
        let linear: Option<OpRef> = match (self.kind, self.reverse) {
            (K::Add, _) | (K::Sub, false) | (K::Mod, false) => {
                Some(unary_op("_backward_copy", UnaryKind::Copy))
            }
            (K::Sub, true) => Some(unary_op("_backward_negative", UnaryKind::Negative)),
            (K::Mul, _) => Some(scalar_op("_backward_mul_scalar", K::Mul, false, s)),
            (K::Div, false) => Some(scalar_op("_backward_div_scalar", K::Div, false, s)),
            _ => None,
        };
        if let Some(op) = linear {
            return Gradient::simple(op, &[], &[], 1);
        }
        let name = match (self.kind, self.reverse) {
            (K::Div, true) => "_backward_rdiv_scalar",
            (K::Mod, true) => "_backward_rmod_scalar",
            (K::Power, false) => "_backward_power_scalar",
            (K::Power, true) => "_backward_rpower_scalar",
            (K::Maximum, _) => "_backward_maximum_scalar",
            (K::Minimum, _) => "_backward_minimum_scalar",
            (K::Hypot, _) => "_backward_hypot_scalar",
            _ => return Grad::Zero,
        };
        let op = Arc::new(ScalarBackward {
            name,
            kind: self.kind,
            reverse: self.reverse,
            scalar: s,
        });
        Gradient::simple(op, &[0], &[], 1)
    }
}

impl CpuKernel for Scalar {
    fn forward(
        &self,
        _: &mut OpContext,
        inputs: &[TBlob],
        outputs: &[TBlob],
        req: &[OpReq],
    ) -> Result<()> {
        dispatch_num!(self.name, inputs[0].dtype, T => scalar_kernel::<T>(
            self, inputs[0].in_out(&outputs[0]), req[0]
        ));
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Binary>(k);
    cpu::add::<Scalar>(k);
}

/// A broadcasting binary operator, for callers in the core.
pub fn broadcast_op(name: &'static str, kind: BinaryKind) -> OpRef {
    Arc::new(Binary {
        name,
        kind,
        broadcast: true,
    })
}

/// A scalar operator, for callers in the core.
pub fn scalar_op(name: &'static str, kind: BinaryKind, reverse: bool, scalar: f64) -> OpRef {
    Arc::new(Scalar {
        name,
        kind,
        reverse,
        scalar,
    })
}

type Entry = (&'static str, &'static [&'static str], BinaryKind);

const ELEMWISE: &[Entry] = &[
    ("elemwise_add", &["_add", "_plus", "_Plus"], BinaryKind::Add),
    (
        "elemwise_sub",
        &["_sub", "_minus", "_Minus"],
        BinaryKind::Sub,
    ),
    ("elemwise_mul", &["_mul", "_Mul"], BinaryKind::Mul),
    ("elemwise_div", &["_div", "_Div"], BinaryKind::Div),
    ("_mod", &["_Mod"], BinaryKind::Mod),
    ("_power", &["_Power"], BinaryKind::Power),
    ("_maximum", &["_Maximum"], BinaryKind::Maximum),
    ("_minimum", &["_Minimum"], BinaryKind::Minimum),
    ("_hypot", &["_Hypot"], BinaryKind::Hypot),
    ("_equal", &[], BinaryKind::Equal),
    ("_not_equal", &[], BinaryKind::NotEqual),
    ("_greater", &[], BinaryKind::Greater),
    ("_greater_equal", &[], BinaryKind::GreaterEqual),
    ("_lesser", &[], BinaryKind::Lesser),
    ("_lesser_equal", &[], BinaryKind::LesserEqual),
    ("_logical_and", &[], BinaryKind::LogicalAnd),
    ("_logical_or", &[], BinaryKind::LogicalOr),
    ("_logical_xor", &[], BinaryKind::LogicalXor),
];

const BROADCAST: &[Entry] = &[
    ("broadcast_add", &["broadcast_plus"], BinaryKind::Add),
    ("broadcast_sub", &["broadcast_minus"], BinaryKind::Sub),
    ("broadcast_mul", &[], BinaryKind::Mul),
    ("broadcast_div", &[], BinaryKind::Div),
    ("broadcast_mod", &[], BinaryKind::Mod),
    ("broadcast_power", &[], BinaryKind::Power),
    ("broadcast_maximum", &[], BinaryKind::Maximum),
    ("broadcast_minimum", &[], BinaryKind::Minimum),
    ("broadcast_hypot", &[], BinaryKind::Hypot),
    ("broadcast_equal", &[], BinaryKind::Equal),
    ("broadcast_not_equal", &[], BinaryKind::NotEqual),
    ("broadcast_greater", &[], BinaryKind::Greater),
    ("broadcast_greater_equal", &[], BinaryKind::GreaterEqual),
    ("broadcast_lesser", &[], BinaryKind::Lesser),
    ("broadcast_lesser_equal", &[], BinaryKind::LesserEqual),
    ("broadcast_logical_and", &[], BinaryKind::LogicalAnd),
    ("broadcast_logical_or", &[], BinaryKind::LogicalOr),
    ("broadcast_logical_xor", &[], BinaryKind::LogicalXor),
];

type ScalarEntry = (&'static str, &'static [&'static str], BinaryKind, bool);

const SCALAR: &[ScalarEntry] = &[
    ("_plus_scalar", &["_PlusScalar"], BinaryKind::Add, false),
    ("_minus_scalar", &["_MinusScalar"], BinaryKind::Sub, false),
    ("_rminus_scalar", &["_RMinusScalar"], BinaryKind::Sub, true),
    ("_mul_scalar", &["_MulScalar"], BinaryKind::Mul, false),
    ("_div_scalar", &["_DivScalar"], BinaryKind::Div, false),
    ("_rdiv_scalar", &["_RDivScalar"], BinaryKind::Div, true),
    ("_mod_scalar", &["_ModScalar"], BinaryKind::Mod, false),
    ("_rmod_scalar", &["_RModScalar"], BinaryKind::Mod, true),
    ("_power_scalar", &["_PowerScalar"], BinaryKind::Power, false),
    (
        "_rpower_scalar",
        &["_RPowerScalar"],
        BinaryKind::Power,
        true,
    ),
    (
        "_maximum_scalar",
        &["_MaximumScalar"],
        BinaryKind::Maximum,
        false,
    ),
    (
        "_minimum_scalar",
        &["_MinimumScalar"],
        BinaryKind::Minimum,
        false,
    ),
    ("_hypot_scalar", &["_HypotScalar"], BinaryKind::Hypot, false),
    ("_equal_scalar", &["_EqualScalar"], BinaryKind::Equal, false),
    (
        "_not_equal_scalar",
        &["_NotEqualScalar"],
        BinaryKind::NotEqual,
        false,
    ),
    (
        "_greater_scalar",
        &["_GreaterScalar"],
        BinaryKind::Greater,
        false,
    ),
    (
        "_greater_equal_scalar",
        &["_GreaterEqualScalar"],
        BinaryKind::GreaterEqual,
        false,
    ),
    (
        "_lesser_scalar",
        &["_LesserScalar"],
        BinaryKind::Lesser,
        false,
    ),
    (
        "_lesser_equal_scalar",
        &["_LesserEqualScalar"],
        BinaryKind::LesserEqual,
        false,
    ),
    ("_logical_and_scalar", &[], BinaryKind::LogicalAnd, false),
    ("_logical_or_scalar", &[], BinaryKind::LogicalOr, false),
    ("_logical_xor_scalar", &[], BinaryKind::LogicalXor, false),
];

/// Registers the binary operators.
pub fn register(r: &mut Registry) {
    for (table, broadcast) in [(ELEMWISE, false), (BROADCAST, true)] {
        for &(name, aliases, kind) in table {
            r.add(OpDef {
                name,
                aliases,
                inputs: &["lhs", "rhs"],
                variadic: false,
                params: ParamList::Names(&[]),
                doc: if broadcast {
                    "Element-wise function of two arrays, with broadcasting."
                } else {
                    "Element-wise function of two arrays of the same shape."
                },
                create: Box::new(move |attrs: &Attrs| -> Result<OpRef> {
                    Params::new(name, attrs, &[])?;
                    Ok(Arc::new(Binary {
                        name,
                        kind,
                        broadcast,
                    }))
                }),
            });
        }
    }
    for &(name, aliases, kind, reverse) in SCALAR {
        r.add(OpDef {
            name,
            aliases,
            inputs: &["data"],
            variadic: false,
            params: ParamList::Names(&["scalar", "is_int"]),
            doc: "Element-wise function of an array and a scalar.",
            create: Box::new(move |attrs: &Attrs| -> Result<OpRef> {
                let p = Params::new(name, attrs, &["scalar", "is_int"])?;
                let scalar = p.float("scalar", 1.0)?;
                p.bool("is_int", true)?;
                Ok(scalar_op(name, kind, reverse, scalar))
            }),
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    #[test]
    fn broadcast_and_scalar() {
        let a = f32a(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = f32a(&[3], &[10., 20., 30.]);
        let c = &run("broadcast_add", &[], &[a.clone(), b])[0];
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(f32s(c), vec![11., 22., 33., 14., 25., 36.]);
        let d = &run(
            "_rminus_scalar",
            &[("scalar", "1")],
            std::slice::from_ref(&a),
        )[0];
        assert_eq!(f32s(d), vec![0., -1., -2., -3., -4., -5.]);
        let col = f32a(&[2, 1], &[1., 2.]);
        let e = &run("broadcast_mul", &[], &[a.clone(), col])[0];
        assert_eq!(f32s(e), vec![1., 2., 3., 8., 10., 12.]);
        assert!(try_run("broadcast_add", &[], &[a.clone(), f32a(&[2], &[1., 2.])]).is_err());
        assert!(try_run("elemwise_add", &[], &[a.clone(), f32a(&[3], &[1., 2., 3.])]).is_err());
    }

    #[test]
    fn integer_semantics_follow_mxnet() {
        let a = array::<i32>(&[4], &[-7, 7, -7, 7]);
        let b = array::<i32>(&[4], &[2, -2, -2, 2]);
        assert_eq!(
            values::<i32>(&run("_div", &[], &[a.clone(), b.clone()])[0]),
            vec![-3, -3, 3, 3]
        );
        assert_eq!(
            values::<i32>(&run("_mod", &[], &[a.clone(), b])[0]),
            vec![1, -1, -1, 1]
        );
        assert_eq!(
            values::<i32>(&run("_div_scalar", &[("scalar", "0")], &[a])[0]),
            vec![0; 4]
        );
    }
}

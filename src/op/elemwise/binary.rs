//! Definitions of the element-wise binary operators: same-shape (`elemwise_*`),
//! broadcasting (`broadcast_*`) and with a scalar (`_plus_scalar`, ...).

use crate::error::Result;
use crate::op::elemwise::unary::{unary_op, UnaryKind};
use crate::op::grad::binary::BinaryBackward;
use crate::op::grad::elemwise::ScalarBackward;
use crate::op::infer;
use crate::op::infer::{elementwise_inference, infer_from_partial};
use crate::op::{
    Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots, TypeSlots,
};
use crate::shape::broadcast_shapes;
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

/// A binary operator on two arrays.
pub(crate) struct Binary {
    pub(crate) name: &'static str,
    pub(crate) kind: BinaryKind,
    pub(crate) broadcast: bool,
}

impl Operator for Binary {
    fn name(&self) -> &'static str {
        self.name
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0), (1, 0)]
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        infer::check_count(self.name, inputs.len(), 2)?;
        if self.broadcast {
            if let [Some(a), Some(b)] = inputs {
                let out = broadcast_shapes(self.name, a, b)?;
                crate::op::assign_shape(self.name, "output 0", &mut outputs[0], &out)?;
            }
            return Ok(());
        }
        infer::same_shape(self.name, inputs, outputs)
    }

    infer_from_partial!(shape);

    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        infer::same_type(self.name, inputs, outputs)
    }

    infer_from_partial!(type);

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

/// MXNet's name of the backward op, or `None` where the gradient is zero.
pub(crate) fn backward_name(kind: BinaryKind, broadcast: bool) -> Option<&'static str> {
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
pub(crate) struct Scalar {
    pub(crate) name: &'static str,
    pub(crate) kind: BinaryKind,
    /// True for `scalar op x` (`_rminus_scalar`, ...).
    pub(crate) reverse: bool,
    pub(crate) scalar: f64,
}

impl Operator for Scalar {
    fn name(&self) -> &'static str {
        self.name
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    elementwise_inference!(1);

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

/// A scalar operator, for callers in the core.
pub fn scalar_op(name: &'static str, kind: BinaryKind, reverse: bool, scalar: f64) -> OpRef {
    Arc::new(Scalar {
        name,
        kind,
        reverse,
        scalar,
    })
}

pub(crate) type Entry = (&'static str, &'static [&'static str], BinaryKind);

pub(crate) const ELEMWISE: &[Entry] = &[
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

pub(crate) const BROADCAST: &[Entry] = &[
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

pub(crate) type ScalarEntry = (&'static str, &'static [&'static str], BinaryKind, bool);

pub(crate) const SCALAR: &[ScalarEntry] = &[
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

const SCALAR_PARAMS: &[Param] = &[
    Param::new("scalar", "double", "1", "Scalar input value"),
    Param::new(
        "is_int",
        "boolean",
        "True",
        "Indicate whether scalar input is int type",
    ),
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
                params: &[],
                doc: if broadcast {
                    "Element-wise function of two arrays, with broadcasting."
                } else {
                    "Element-wise function of two arrays of the same shape."
                },
                create: Box::new(move |attrs: &Attrs| -> Result<OpRef> {
                    Params::declared(name, attrs, &[])?;
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
            params: SCALAR_PARAMS,
            doc: "Element-wise function of an array and a scalar.",
            create: Box::new(move |attrs: &Attrs| -> Result<OpRef> {
                let p = Params::declared(name, attrs, SCALAR_PARAMS)?;
                let scalar = p.get("scalar")?;
                p.get::<bool>("is_int")?;
                Ok(scalar_op(name, kind, reverse, scalar))
            }),
        });
    }
}

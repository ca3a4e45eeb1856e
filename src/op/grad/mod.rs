//! Backward operators: the definitions of the operators that compute input gradients
//! from output gradients, one module per forward family. Forward operators hand them out
//! through `Operator::gradient`.

pub mod binary;
pub mod elemwise;
pub mod indexing;
pub mod join;
pub mod linalg;
pub mod reduce;
pub mod view;

use super::{find, Attrs, Grad, OpDef, OpRef, Registry};
use crate::error::{Error, Result};

/// A registered backward operator: its name, the forward operator whose gradient it
/// computes, its inputs and whether it takes any number of them.
pub(crate) type BackwardEntry = (&'static str, &'static str, &'static [&'static str], bool);

/// Every backward operator of these families, under MXNet's names. Where several forward
/// operators share one backward (`_backward_copy`, `_backward_reshape`, ...) the entry
/// names the one whose attributes it takes.
pub(crate) const BACKWARD_OPS: &[BackwardEntry] = &[
    ("_backward_Cast", "Cast", &["ograd", "data"], false),
    ("_backward_Concat", "Concat", &["ograd", "data"], true),
    ("_backward_SwapAxis", "SwapAxis", &["ograd", "data"], false),
    ("_backward_abs", "abs", &["ograd", "data"], false),
    ("_backward_add", "elemwise_add", &["ograd"], false),
    ("_backward_add_n", "add_n", &["ograd"], false),
    ("_backward_arccos", "arccos", &["ograd", "data"], false),
    ("_backward_arccosh", "arccosh", &["ograd", "data"], false),
    ("_backward_arcsin", "arcsin", &["ograd", "data"], false),
    ("_backward_arcsinh", "arcsinh", &["ograd", "data"], false),
    ("_backward_arctan", "arctan", &["ograd", "data"], false),
    ("_backward_arctanh", "arctanh", &["ograd", "data"], false),
    (
        "_backward_batch_dot",
        "batch_dot",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_add",
        "broadcast_add",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_axis",
        "broadcast_axis",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_broadcast_div",
        "broadcast_div",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_hypot",
        "broadcast_hypot",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_like",
        "broadcast_like",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_maximum",
        "broadcast_maximum",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_minimum",
        "broadcast_minimum",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_mod",
        "broadcast_mod",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_mul",
        "broadcast_mul",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_power",
        "broadcast_power",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_sub",
        "broadcast_sub",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_broadcast_to",
        "broadcast_to",
        &["ograd", "data"],
        false,
    ),
    ("_backward_cbrt", "cbrt", &["ograd", "output"], false),
    ("_backward_clip", "clip", &["ograd", "data"], false),
    ("_backward_copy", "_copy", &["ograd"], false),
    ("_backward_cos", "cos", &["ograd", "data"], false),
    ("_backward_cosh", "cosh", &["ograd", "data"], false),
    ("_backward_degrees", "degrees", &["ograd", "data"], false),
    (
        "_backward_depth_to_space",
        "depth_to_space",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_div",
        "elemwise_div",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    ("_backward_div_scalar", "_div_scalar", &["ograd"], false),
    ("_backward_dot", "dot", &["ograd", "lhs", "rhs"], false),
    ("_backward_erf", "erf", &["ograd", "data"], false),
    ("_backward_erfinv", "erfinv", &["ograd", "output"], false),
    ("_backward_exp", "exp", &["ograd", "output"], false),
    ("_backward_expm1", "expm1", &["ograd", "data"], false),
    ("_backward_gamma", "gamma", &["ograd", "data"], false),
    ("_backward_gammaln", "gammaln", &["ograd", "data"], false),
    (
        "_backward_gather_nd",
        "gather_nd",
        &["ograd", "indices", "data"],
        false,
    ),
    (
        "_backward_hard_sigmoid",
        "hard_sigmoid",
        &["ograd", "data"],
        false,
    ),
    ("_backward_hypot", "_hypot", &["ograd", "lhs", "rhs"], false),
    (
        "_backward_hypot_scalar",
        "_hypot_scalar",
        &["ograd", "data"],
        false,
    ),
    ("_backward_log", "log", &["ograd", "data"], false),
    ("_backward_log10", "log10", &["ograd", "data"], false),
    ("_backward_log1p", "log1p", &["ograd", "data"], false),
    ("_backward_log2", "log2", &["ograd", "data"], false),
    ("_backward_max", "max", &["ograd", "data", "output"], false),
    (
        "_backward_maximum",
        "_maximum",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_maximum_scalar",
        "_maximum_scalar",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_mean",
        "mean",
        &["ograd", "data", "output"],
        false,
    ),
    ("_backward_min", "min", &["ograd", "data", "output"], false),
    (
        "_backward_minimum",
        "_minimum",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    (
        "_backward_minimum_scalar",
        "_minimum_scalar",
        &["ograd", "data"],
        false,
    ),
    ("_backward_mod", "_mod", &["ograd", "lhs", "rhs"], false),
    (
        "_backward_mul",
        "elemwise_mul",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    ("_backward_mul_scalar", "_mul_scalar", &["ograd"], false),
    (
        "_backward_nanprod",
        "nanprod",
        &["ograd", "data", "output"],
        false,
    ),
    (
        "_backward_nansum",
        "nansum",
        &["ograd", "data", "output"],
        false,
    ),
    ("_backward_negative", "negative", &["ograd"], false),
    (
        "_backward_norm",
        "norm",
        &["ograd", "data", "output"],
        false,
    ),
    ("_backward_pick", "pick", &["ograd", "data", "index"], false),
    ("_backward_power", "_power", &["ograd", "lhs", "rhs"], false),
    (
        "_backward_power_scalar",
        "_power_scalar",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_prod",
        "prod",
        &["ograd", "data", "output"],
        false,
    ),
    ("_backward_radians", "radians", &["ograd", "data"], false),
    ("_backward_rcbrt", "rcbrt", &["ograd", "data"], false),
    (
        "_backward_rdiv_scalar",
        "_rdiv_scalar",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_reciprocal",
        "reciprocal",
        &["ograd", "data"],
        false,
    ),
    ("_backward_relu", "relu", &["ograd", "output"], false),
    ("_backward_repeat", "repeat", &["ograd", "data"], false),
    ("_backward_reshape", "Reshape", &["ograd", "data"], false),
    (
        "_backward_reshape_like",
        "reshape_like",
        &["ograd", "lhs", "rhs"],
        false,
    ),
    ("_backward_reverse", "reverse", &["ograd", "data"], false),
    (
        "_backward_rmod_scalar",
        "_rmod_scalar",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_rpower_scalar",
        "_rpower_scalar",
        &["ograd", "data"],
        false,
    ),
    ("_backward_rsqrt", "rsqrt", &["ograd", "data"], false),
    ("_backward_sigmoid", "sigmoid", &["ograd", "output"], false),
    ("_backward_sin", "sin", &["ograd", "data"], false),
    ("_backward_sinh", "sinh", &["ograd", "data"], false),
    ("_backward_slice", "slice", &["ograd", "data"], false),
    (
        "_backward_slice_axis",
        "slice_axis",
        &["ograd", "data"],
        false,
    ),
    (
        "_backward_slice_like",
        "slice_like",
        &["ograd", "data", "shape_like"],
        false,
    ),
    ("_backward_softsign", "softsign", &["ograd", "data"], false),
    (
        "_backward_space_to_depth",
        "space_to_depth",
        &["ograd", "data"],
        false,
    ),
    ("_backward_sqrt", "sqrt", &["ograd", "output"], false),
    ("_backward_square", "square", &["ograd", "data"], false),
    ("_backward_sub", "elemwise_sub", &["ograd"], false),
    ("_backward_sum", "sum", &["ograd", "data", "output"], false),
    ("_backward_take", "take", &["ograd", "indices", "a"], false),
    ("_backward_tan", "tan", &["ograd", "output"], false),
    ("_backward_tanh", "tanh", &["ograd", "output"], false),
    ("_backward_tile", "tile", &["ograd", "data"], false),
    ("_backward_topk", "topk", &["ograd", "data"], false),
    (
        "_backward_transpose",
        "transpose",
        &["ograd", "data"],
        false,
    ),
    ("_backward_where", "where", &["ograd", "condition"], false),
];

/// Builds `name` from the attributes of its forward operator `forward`.
fn create(name: &'static str, forward: &'static str, attrs: &Attrs) -> Result<OpRef> {
    let op = find(forward)?.build(attrs)?;
    match op.gradient() {
        Grad::Op(g) if g.op.name() == name => Ok(g.op),
        _ => Err(Error::Value(format!(
            "{name}: {forward} with these attributes has no backward operator {name}"
        ))),
    }
}

/// Registers the backward operators; their forward operators must be registered first.
pub fn register(r: &mut Registry) {
    register_backward(r, BACKWARD_OPS);
}

/// Registers the backward operators `entries`, each taking its forward operator's
/// attributes; the forward operators must be registered first.
pub(crate) fn register_backward(r: &mut Registry, entries: &'static [BackwardEntry]) {
    for &(name, forward, inputs, variadic) in entries {
        let params = r
            .params_of(forward)
            .unwrap_or_else(|| panic!("{name}: forward operator {forward} is not registered"));
        r.add(OpDef {
            name,
            aliases: &[],
            inputs,
            variadic,
            params,
            doc: "Gradient of the forward operator's inputs from the gradient of its outputs.",
            create: Box::new(move |a| create(name, forward, a)),
        });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::BACKWARD_OPS;
    use crate::op::{find, Attrs};

    /// The forward's required attributes (and those that give it a gradient).
    pub(crate) fn forward_attrs(forward: &str) -> Attrs {
        let pairs: &[(&str, &str)] = match forward {
            "clip" => &[("a_min", "0"), ("a_max", "1")],
            "Cast" => &[("dtype", "float32")],
            "Concat" => &[("num_args", "2")],
            "add_n" => &[("num_args", "2")],
            "SwapAxis" => &[("dim1", "0"), ("dim2", "1")],
            "Reshape" => &[("shape", "(1,)")],
            "broadcast_to" => &[("shape", "(1,)")],
            "broadcast_axis" => &[("axis", "0"), ("size", "1")],
            "depth_to_space" | "space_to_depth" => &[("block_size", "2")],
            "repeat" => &[("repeats", "2")],
            "tile" => &[("reps", "(2,)")],
            "reverse" | "take" | "pick" => &[("axis", "0")],
            "slice" => &[("begin", "(0,)"), ("end", "(1,)")],
            "slice_axis" => &[("axis", "0"), ("begin", "0"), ("end", "1")],
            "topk" => &[("ret_typ", "value")],
            f if f.ends_with("_scalar") => &[("scalar", "2")],
            _ => &[],
        };
        crate::op::testutil::attrs(pairs)
    }

    /// Checks that each backward operator of `ops` is registered under its name with its
    /// inputs, takes its forward's attributes, and builds from `forward_attrs`.
    pub(crate) fn check_registered(ops: &[super::BackwardEntry], forward_attrs: fn(&str) -> Attrs) {
        for &(name, forward, inputs, _) in ops {
            let def = find(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(def.inputs, inputs);
            assert_eq!(
                def.param_names().collect::<Vec<_>>(),
                find(forward).unwrap().param_names().collect::<Vec<_>>(),
                "{name}"
            );
            let op = def
                .build(&forward_attrs(forward))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(op.name(), name);
        }
    }

    #[test]
    fn backward_operators_are_registered_under_their_names() {
        check_registered(BACKWARD_OPS, forward_attrs);
        assert!(find("_backward_exp").is_ok());
    }

    #[test]
    fn a_backward_takes_its_forward_attributes() {
        let def = find("_backward_clip").unwrap();
        let e = def.build(&Attrs::new()).err().unwrap();
        assert!(e.message().contains("a_min"), "{e}");
        let e = def
            .build(
                &forward_attrs("clip")
                    .into_iter()
                    .chain([("bogus".into(), "1".into())])
                    .collect(),
            )
            .err()
            .unwrap();
        assert!(e.message().contains("bogus"), "{e}");
        // Attributes under which the forward has no such backward are refused.
        let e = find("_backward_topk")
            .unwrap()
            .build(&Attrs::new())
            .err()
            .unwrap();
        assert!(e.message().contains("no backward operator"), "{e}");
    }
}

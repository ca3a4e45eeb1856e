//! Gradients written with differentiable forward operators, used when a backward pass
//! records its own graph (`create_graph`): a gradient built this way can be
//! differentiated again, to any order.

use super::backward::Value;
use super::invoke;
use crate::error::Result;
use crate::op::elemwise::binary::{BinaryKind, Scalar};
use crate::op::elemwise::unary::{Unary, UnaryKind};
use crate::op::{self, Attrs, Operator};

/// Runs forward operator `name` on `inputs`, recorded; its first output.
fn call(name: &str, attrs: &[(&str, String)], inputs: &[&Value]) -> Result<Value> {
    let attrs: Attrs = attrs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let op = op::find(name)?.build(&attrs)?;
    let ins: Vec<Value> = inputs.iter().map(|v| (*v).clone()).collect();
    Ok(invoke(&op, &ins, None, None, false)?.swap_remove(0))
}

fn un(name: &str, x: &Value) -> Result<Value> {
    call(name, &[], &[x])
}

fn scalar(name: &str, x: &Value, s: f64) -> Result<Value> {
    call(name, &[("scalar", format!("{s:?}"))], &[x])
}

fn bin(name: &str, a: &Value, b: &Value) -> Result<Value> {
    call(name, &[], &[a, b])
}

/// The derivative of unary operator `name` at its input `x` with output `y`, as a
/// recorded array; `None` where no composition is written.
fn unary_derivative(name: &str, x: &Value, y: &Value) -> Option<Result<Value>> {
    use std::f64::consts::{LN_10, LN_2};
    let one_minus_square = |v: &Value| scalar("_rminus_scalar", &un("square", v)?, 1.0);
    let d = match name {
        "exp" => Ok(y.clone()),
        "expm1" => un("exp", x),
        "log" => un("reciprocal", x),
        "log1p" => scalar("_plus_scalar", x, 1.0).and_then(|v| un("reciprocal", &v)),
        "log2" => un("reciprocal", x).and_then(|v| scalar("_div_scalar", &v, LN_2)),
        "log10" => un("reciprocal", x).and_then(|v| scalar("_div_scalar", &v, LN_10)),
        "sin" => un("cos", x),
        "cos" => un("sin", x).and_then(|v| un("negative", &v)),
        "tan" => un("square", y).and_then(|v| scalar("_plus_scalar", &v, 1.0)),
        "sinh" => un("cosh", x),
        "cosh" => un("sinh", x),
        "tanh" => one_minus_square(y),
        "arcsin" => one_minus_square(x).and_then(|v| un("rsqrt", &v)),
        "arccos" => one_minus_square(x)
            .and_then(|v| un("rsqrt", &v))
            .and_then(|v| un("negative", &v)),
        "arctan" => un("square", x)
            .and_then(|v| scalar("_plus_scalar", &v, 1.0))
            .and_then(|v| un("reciprocal", &v)),
        "arcsinh" => un("square", x)
            .and_then(|v| scalar("_plus_scalar", &v, 1.0))
            .and_then(|v| un("rsqrt", &v)),
        "arccosh" => un("square", x)
            .and_then(|v| scalar("_minus_scalar", &v, 1.0))
            .and_then(|v| un("rsqrt", &v)),
        "arctanh" => one_minus_square(x).and_then(|v| un("reciprocal", &v)),
        "sqrt" => scalar("_rdiv_scalar", y, 0.5),
        "cbrt" => un("square", y).and_then(|v| scalar("_rdiv_scalar", &v, 1.0 / 3.0)),
        "rsqrt" => un("rsqrt", x)
            .and_then(|v| bin("elemwise_div", &v, x))
            .and_then(|v| scalar("_mul_scalar", &v, -0.5)),
        "rcbrt" => un("rcbrt", x)
            .and_then(|v| bin("elemwise_div", &v, x))
            .and_then(|v| scalar("_mul_scalar", &v, -1.0 / 3.0)),
        "reciprocal" => un("reciprocal", x)
            .and_then(|v| un("square", &v))
            .and_then(|v| un("negative", &v)),
        "square" => scalar("_mul_scalar", x, 2.0),
        "sigmoid" => scalar("_rminus_scalar", y, 1.0).and_then(|v| bin("elemwise_mul", y, &v)),
        "softsign" => un("abs", x)
            .and_then(|v| scalar("_plus_scalar", &v, 1.0))
            .and_then(|v| un("reciprocal", &v))
            .and_then(|v| un("square", &v)),
        "relu" => scalar("_greater_scalar", y, 0.0),
        "abs" => un("sign", x),
        _ => return None,
    };
    Some(d)
}

/// Sums `g` over the axes it was broadcast along, down to `shape`.
fn reduce_to(g: Value, shape: &[usize]) -> Result<Value> {
    let gs = g.0.shape().to_vec();
    if gs == shape {
        return Ok(g);
    }
    let pad = gs.len() - shape.len();
    let axes: Vec<String> = (0..gs.len())
        .filter(|&i| i < pad || (shape[i - pad] == 1 && gs[i] != 1))
        .map(|i| i.to_string())
        .collect();
    let summed = call(
        "sum",
        &[
            ("axis", format!("({},)", axes.join(","))),
            ("keepdims", "True".into()),
        ],
        &[&g],
    )?;
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    call(
        "Reshape",
        &[("shape", format!("({},)", dims.join(",")))],
        &[&summed],
    )
}

/// The gradients of a two-input element-wise op from `dy`, its inputs `a` and `b`, for
/// `mul`, `div`, `add` and `sub`, reduced to the inputs' shapes where they broadcast.
fn binary(
    kind: BinaryKind,
    dy: &Value,
    a: Option<&Value>,
    b: Option<&Value>,
) -> Option<Result<Vec<(usize, Value)>>> {
    let (sa, sb) = (
        a.map(|v| v.0.shape().to_vec()),
        b.map(|v| v.0.shape().to_vec()),
    );
    let grads = || -> Result<Option<(Value, Value)>> {
        Ok(Some(match kind {
            BinaryKind::Add => (dy.clone(), dy.clone()),
            BinaryKind::Sub => (dy.clone(), un("negative", dy)?),
            BinaryKind::Mul => {
                let (Some(a), Some(b)) = (a, b) else {
                    return Ok(None);
                };
                (bin("broadcast_mul", dy, b)?, bin("broadcast_mul", dy, a)?)
            }
            BinaryKind::Div => {
                let (Some(a), Some(b)) = (a, b) else {
                    return Ok(None);
                };
                let da = bin("broadcast_div", dy, b)?;
                let num = bin("broadcast_mul", dy, a)?;
                let db = un("negative", &bin("broadcast_div", &num, &un("square", b)?)?)?;
                (da, db)
            }
            _ => return Ok(None),
        }))
    };
    let out = match grads() {
        Ok(Some(v)) => v,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    let dy_shape = dy.0.shape().to_vec();
    let reduce =
        |g: Value, s: Option<Vec<usize>>| reduce_to(g, &s.unwrap_or_else(|| dy_shape.clone()));
    Some((|| {
        Ok(vec![(0, reduce(out.0, sa)?), (1, reduce(out.1, sb)?)])
    })())
}

/// The gradient of a scalar op (`x * 2`, `2 / x`, `x ** 3`) from `dy` and its input `x`.
fn scalar_op(op: &Scalar, dy: &Value, x: Option<&Value>) -> Option<Result<Value>> {
    use BinaryKind as K;
    let s = op.scalar;
    Some(match (op.kind, op.reverse) {
        (K::Add, _) | (K::Sub, false) => Ok(dy.clone()),
        (K::Sub, true) => un("negative", dy),
        (K::Mul, _) => scalar("_mul_scalar", dy, s),
        (K::Div, false) => scalar("_div_scalar", dy, s),
        (K::Div, true) => {
            let x = x?;
            (|| {
                let q = bin("elemwise_div", dy, &un("square", x)?)?;
                scalar("_mul_scalar", &q, -s)
            })()
        }
        (K::Power, false) => {
            let x = x?;
            (|| {
                let p = scalar("_power_scalar", x, s - 1.0)?;
                scalar("_mul_scalar", &bin("elemwise_mul", dy, &p)?, s)
            })()
        }
        (K::Power, true) => {
            let x = x?;
            (|| {
                let y = scalar("_rpower_scalar", x, s)?;
                scalar("_mul_scalar", &bin("elemwise_mul", dy, &y)?, s.ln())
            })()
        }
        _ => return None,
    })
}

/// The gradients of `forward` (with inputs `xs` and outputs `ys`, `None` where not
/// saved) from its output gradient `dy` in the backward pass's mode, each with the input
/// index it is for; `None` where no composition is written.
pub(super) fn gradient(
    forward: &dyn Operator,
    dy: &Value,
    xs: &[Option<Value>],
    ys: &[Option<Value>],
    is_train: bool,
) -> Option<Result<Vec<(usize, Value)>>> {
    use std::f64::consts::PI;
    let name = forward.name();
    let x0 = xs.first().cloned().flatten();
    let y0 = ys.first().cloned().flatten();
    let one = |g: Result<Value>| Some(g.map(|g| vec![(0, g)]));
    if let Some(op) = forward.as_any().downcast_ref::<Scalar>() {
        return scalar_op(op, dy, x0.as_ref()).map(|g| g.map(|g| vec![(0, g)]));
    }
    if let Some(Unary {
        kind: UnaryKind::Clip(lo, hi),
        ..
    }) = forward.as_any().downcast_ref::<Unary>()
    {
        // Inside the bounds (inclusive) the gradient passes, outside it is zero.
        let x = x0.as_ref()?;
        return one((|| {
            let inside = bin(
                "elemwise_mul",
                &scalar("_greater_equal_scalar", x, *lo)?,
                &scalar("_lesser_equal_scalar", x, *hi)?,
            )?;
            bin("elemwise_mul", dy, &inside)
        })());
    }
    let binary_kind = match name {
        "elemwise_add" | "broadcast_add" | "broadcast_plus" => Some(BinaryKind::Add),
        "elemwise_sub" | "broadcast_sub" | "broadcast_minus" => Some(BinaryKind::Sub),
        "elemwise_mul" | "broadcast_mul" => Some(BinaryKind::Mul),
        "elemwise_div" | "broadcast_div" => Some(BinaryKind::Div),
        _ => None,
    };
    if let Some(kind) = binary_kind {
        let b = xs.get(1).cloned().flatten();
        return binary(kind, dy, x0.as_ref(), b.as_ref());
    }
    match name {
        // Training scales by the mask drawn in the forward pass (its second output).
        "Dropout" if is_train => {
            let mask = ys.get(1).cloned().flatten()?;
            return one(bin("elemwise_mul", dy, &mask));
        }
        "degrees" => return one(scalar("_mul_scalar", dy, 180.0 / PI)),
        "radians" => return one(scalar("_mul_scalar", dy, PI / 180.0)),
        "negative" => return one(un("negative", dy)),
        "_copy" => return one(Ok(dy.clone())),
        _ => {}
    }
    // A unary op: its derivative reads its input or its output, whichever was saved.
    let (x, y) = match (x0, y0) {
        (Some(x), Some(y)) => (x, y),
        (Some(x), None) => (x.clone(), x),
        (None, Some(y)) => (y.clone(), y),
        (None, None) => return None,
    };
    let d = unary_derivative(name, &x, &y)?;
    one(d.and_then(|d| bin("elemwise_mul", dy, &d)))
}

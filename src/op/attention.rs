//! Definitions of the multi-head attention products of MXNet's transformer operators
//! (`_contrib_interleaved_matmul_{selfatt,encdec}_{qk,valatt}`), on projections
//! interleaved per head in the last axis, as reshapes, transposes and `batch_dot`s.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{Builder, Defined, Src};
use crate::op::{Attrs, OpDef, OpRef, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};

const PARAMS: &[Param] = &[Param::required("heads", "int", "Set number of heads")];

/// Which product.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    SelfQk,
    SelfValAtt,
    EncDecQk,
    EncDecValAtt,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::SelfQk => "_contrib_interleaved_matmul_selfatt_qk",
            Kind::SelfValAtt => "_contrib_interleaved_matmul_selfatt_valatt",
            Kind::EncDecQk => "_contrib_interleaved_matmul_encdec_qk",
            Kind::EncDecValAtt => "_contrib_interleaved_matmul_encdec_valatt",
        }
    }
}

fn bad(kind: Kind, why: &str, shapes: &[Shape]) -> Error {
    let list: Vec<String> = shapes.iter().map(|s| fmt_shape(s)).collect();
    Error::Value(format!(
        "{}: {why} (input shapes {})",
        kind.name(),
        list.join(", ")
    ))
}

/// The output shape, checking the inputs.
fn output(kind: Kind, heads: usize, s: &[Shape]) -> Result<Shape> {
    if s.iter().any(|x| x.len() != 3) {
        return Err(bad(kind, "inputs must be 3-D", s));
    }
    let out = match kind {
        Kind::SelfQk => {
            if !s[0][2].is_multiple_of(3 * heads) {
                return Err(bad(
                    kind,
                    "the last axis must hold 3 projections per head",
                    s,
                ));
            }
            [heads * s[0][1], s[0][0], s[0][0]]
        }
        Kind::SelfValAtt => {
            let (l, b) = (s[0][0], s[0][1]);
            if !s[0][2].is_multiple_of(3 * heads) || s[1].as_slice() != [b * heads, l, l] {
                return Err(bad(
                    kind,
                    "attention must be (batch * heads, length, length) for 3 projections per head",
                    s,
                ));
            }
            [l, b, s[0][2] / 3]
        }
        Kind::EncDecQk => {
            let (q, kv) = (&s[0], &s[1]);
            if !q[2].is_multiple_of(heads) || kv[2] != 2 * q[2] || q[1] != kv[1] {
                return Err(bad(
                    kind,
                    "keys_values must hold 2 projections per head of the queries' batch",
                    s,
                ));
            }
            [q[1] * heads, q[0], kv[0]]
        }
        Kind::EncDecValAtt => {
            let (kv, att) = (&s[0], &s[1]);
            if !kv[2].is_multiple_of(2 * heads) || att[0] != kv[1] * heads || att[2] != kv[0] {
                return Err(bad(
                    kind,
                    "attention must be (batch * heads, queries, keys) for 2 projections per head",
                    s,
                ));
            }
            [att[1], kv[1], kv[2] / 2]
        }
    };
    Ok(Shape::from_slice(&out))
}

/// Projection `which` of `parts` interleaved per head in `x` of shape `(L, B, H*parts*d)`,
/// as `(B*H, L, d)`.
fn projection(
    b: &mut Builder,
    x: Src,
    s: &Shape,
    heads: usize,
    parts: usize,
    which: usize,
) -> Result<Src> {
    let (l, batch) = (s[0], s[1]);
    let d = s[2] / (heads * parts);
    let split = b.reshape(x, &[l, batch, heads, parts, d])?;
    let one = b.op(
        "slice_axis",
        &[
            ("axis", "3".into()),
            ("begin", which.to_string()),
            ("end", (which + 1).to_string()),
        ],
        &[split],
    )?;
    let one = b.reshape(one, &[l, batch, heads, d])?;
    let t = b.op("transpose", &[("axes", "(1, 2, 0, 3)".into())], &[one])?;
    b.reshape(t, &[batch * heads, l, d])
}

/// `(B*H, L, d)` back to `(L, B, H*d)`.
fn merge_heads(
    b: &mut Builder,
    x: Src,
    batch: usize,
    heads: usize,
    l: usize,
    d: usize,
) -> Result<Src> {
    let split = b.reshape(x, &[batch, heads, l, d])?;
    let t = b.op("transpose", &[("axes", "(2, 0, 1, 3)".into())], &[split])?;
    b.reshape(t, &[l, batch, heads * d])
}

fn build(kind: Kind, heads: usize, b: &mut Builder, s: &[Shape]) -> Result<Src> {
    match kind {
        Kind::SelfQk | Kind::EncDecQk => {
            let (q, k) = if kind == Kind::SelfQk {
                (
                    projection(b, Src::Input(0), &s[0], heads, 3, 0)?,
                    projection(b, Src::Input(0), &s[0], heads, 3, 1)?,
                )
            } else {
                (
                    projection(b, Src::Input(0), &s[0], heads, 1, 0)?,
                    projection(b, Src::Input(1), &s[1], heads, 2, 0)?,
                )
            };
            let d = if kind == Kind::SelfQk {
                s[0][2] / (3 * heads)
            } else {
                s[0][2] / heads
            };
            let q = b.scalar("_div_scalar", q, (d as f64).sqrt())?;
            b.op("batch_dot", &[("transpose_b", "true".into())], &[q, k])
        }
        Kind::SelfValAtt | Kind::EncDecValAtt => {
            let (parts, which) = if kind == Kind::SelfValAtt {
                (3, 2)
            } else {
                (2, 1)
            };
            let v = projection(b, Src::Input(0), &s[0], heads, parts, which)?;
            let y = b.binary("batch_dot", Src::Input(1), v)?;
            let d = s[0][2] / (parts * heads);
            merge_heads(b, y, s[0][1], heads, s[1][1], d)
        }
    }
}

fn create(kind: Kind, attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(kind.name(), attrs, PARAMS)?;
    let heads: usize = p.get("heads")?;
    if heads == 0 {
        return Err(Error::Value(format!(
            "{}: heads must be positive",
            kind.name()
        )));
    }
    let n_in = if kind == Kind::SelfQk { 1 } else { 2 };
    Ok(Defined::op(
        kind.name(),
        Box::new(move |s: &[Shape]| {
            crate::op::check_inputs(kind.name(), s, n_in)?;
            Ok(vec![output(kind, heads, s)?])
        }),
        Box::new(move |t: &[DType]| Ok(vec![crate::op::same_dtype(kind.name(), t)?])),
        Box::new(move |b, s, _| Ok(vec![build(kind, heads, b, s)?])),
    ))
}

/// Registers the four attention products.
pub fn register(r: &mut Registry) {
    let ops: [(Kind, &'static [&'static str], &'static str); 4] = [
        (
            Kind::SelfQk,
            &["queries_keys_values"],
            "Products of the queries and keys of self-attention, per head.",
        ),
        (
            Kind::SelfValAtt,
            &["queries_keys_values", "attention"],
            "Products of the attention weights and values of self-attention, per head.",
        ),
        (
            Kind::EncDecQk,
            &["queries", "keys_values"],
            "Products of the queries and keys of encoder-decoder attention, per head.",
        ),
        (
            Kind::EncDecValAtt,
            &["keys_values", "attention"],
            "Products of the attention weights and values of encoder-decoder attention, per head.",
        ),
    ];
    for (kind, inputs, doc) in ops {
        r.add(OpDef {
            name: kind.name(),
            aliases: &[],
            inputs,
            variadic: false,
            params: PARAMS,
            doc,
            create: Box::new(move |a| create(kind, a)),
        });
    }
}

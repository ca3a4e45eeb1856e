//! Definitions of the sequence operators over padded batches, `SequenceMask`,
//! `SequenceLast` and `SequenceReverse`, as compositions of index arithmetic, `where`
//! and `gather_nd`.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Composite, Decomposition, Src};
use crate::op::infer::{check_count, infer_from_partial};
use crate::op::{assign_shape, Attrs, OpDef, OpRef, Operator, Param, Params, Registry, ShapeSlots};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

/// Which sequence operator.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Mask,
    Last,
    Reverse,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Mask => "SequenceMask",
            Kind::Last => "SequenceLast",
            Kind::Reverse => "SequenceReverse",
        }
    }
}

/// A sequence operator: data of shape `(T, N, ...)` (or `(N, T, ...)` with `axis=1`)
/// and, with `use_sequence_length`, each sample's length of shape `(N,)`.
struct Sequence {
    kind: Kind,
    use_length: bool,
    value: f64,
    axis: usize,
}

impl Sequence {
    /// The time and batch axes.
    fn axes(&self) -> (usize, usize) {
        (self.axis, 1 - self.axis)
    }

    fn check(&self, data: &Shape, length: Option<&Shape>) -> Result<()> {
        let op = self.kind.name();
        if data.len() < 2 {
            return Err(Error::Value(format!(
                "{op}: data must have at least 2 dimensions (time and batch), got shape {}",
                fmt_shape(data)
            )));
        }
        if let Some(l) = length {
            let n = data[self.axes().1];
            if l.as_slice() != [n] {
                return Err(Error::Value(format!(
                    "{op}: sequence_length must have shape ({n},) for data of shape {}, got {}",
                    fmt_shape(data),
                    fmt_shape(l)
                )));
            }
        }
        Ok(())
    }

    fn output_shape(&self, data: &Shape) -> Shape {
        match self.kind {
            Kind::Last => {
                let mut s = data.clone();
                s.remove(self.axis);
                s
            }
            _ => data.clone(),
        }
    }

    /// Each step's index along time, shaped to broadcast against `(T, N)` or `(N, T)`.
    fn steps(&self, b: &mut Builder, t: usize, dtype: DType) -> Result<Src> {
        let r = b.op(
            "_arange",
            &[
                ("start", "0".into()),
                ("stop", t.to_string()),
                ("dtype", dtype.name().into()),
            ],
            &[],
        )?;
        let shape = if self.axis == 0 { [t, 1] } else { [1, t] };
        b.reshape(r, &shape)
    }

    /// The lengths shaped to broadcast against `(T, N)` or `(N, T)`.
    fn lengths(&self, b: &mut Builder, len: Src, n: usize) -> Result<Src> {
        let shape = if self.axis == 0 { [1, n] } else { [n, 1] };
        b.reshape(len, &shape)
    }

    /// The data's (time, batch) grid shape.
    fn grid(&self, data: &Shape) -> [usize; 2] {
        [data[0], data[1]]
    }

    fn mask(&self, b: &mut Builder, data: &Shape, len: Src, dtype: DType) -> Result<Src> {
        let (ta, ba) = self.axes();
        let t = self.steps(b, data[ta], DType::I64)?;
        let len = self.lengths(b, len, data[ba])?;
        let keep = b.binary("broadcast_lesser", t, len)?;
        let mut full = self.grid(data).to_vec();
        full.extend(std::iter::repeat_n(1, data.len() - 2));
        let keep = b.reshape(keep, &full)?;
        let keep = b.binary("broadcast_like", keep, Src::Input(0))?;
        let dims: Vec<i64> = data.iter().map(|&d| d as i64).collect();
        let fill = b.op(
            "_full",
            &[
                ("shape", tuple_attr(&dims)),
                ("value", format!("{:e}", self.value)),
                ("dtype", dtype.name().into()),
            ],
            &[],
        )?;
        b.op("where", &[], &[keep, Src::Input(0), fill])
    }

    /// `data` gathered at time indices `time` (a `(T, N)`/`(N, T)` grid, or `(N,)`).
    fn gather(
        &self,
        b: &mut Builder,
        time: Src,
        batch_like: Src,
        n: usize,
        ltype: DType,
    ) -> Result<Src> {
        let batch = b.op(
            "_arange",
            &[
                ("start", "0".into()),
                ("stop", n.to_string()),
                ("dtype", ltype.name().into()),
            ],
            &[],
        )?;
        let batch = if self.kind == Kind::Reverse {
            let b1 = b.reshape(batch, &[1, n])?;
            b.binary("broadcast_like", b1, batch_like)?
        } else {
            batch
        };
        let rows = if self.axis == 0 {
            [time, batch]
        } else {
            [batch, time]
        };
        let idx = b.op(
            "stack",
            &[("axis", "0".into()), ("num_args", "2".into())],
            &rows,
        )?;
        b.op("gather_nd", &[], &[Src::Input(0), idx])
    }
}

impl Operator for Sequence {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn input_names(&self) -> Option<Vec<String>> {
        let mut v = vec!["data".to_string()];
        if self.use_length {
            v.push("sequence_length".into());
        }
        Some(v)
    }

    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }

    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let op = self.kind.name();
        check_count(op, inputs.len(), 1 + self.use_length as usize)?;
        if inputs[0].is_none() && self.kind != Kind::Last {
            if let Some(y) = &outputs[0] {
                inputs[0] = Some(y.clone());
            }
        }
        let Some(data) = inputs[0].clone() else {
            return Ok(());
        };
        self.check(&data, None)?;
        if self.use_length {
            let n = Shape::from_slice(&[data[self.axes().1]]);
            assign_shape(op, "sequence_length", &mut inputs[1], &n)?;
        }
        assign_shape(op, "output", &mut outputs[0], &self.output_shape(&data))
    }

    infer_from_partial!(shape);

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
}

impl Composite for Sequence {
    fn decompose(&self, shapes: &[Shape], types: &[DType]) -> Result<Decomposition> {
        let data = &shapes[0];
        self.check(data, shapes.get(1))?;
        let (ta, ba) = self.axes();
        let (t, n) = (data[ta], data[ba]);
        let mut b = Builder::new();
        // Lengths count whole steps, as integers (MXNet truncates them too).
        let len = if self.use_length {
            b.op("Cast", &[("dtype", "int64".into())], &[Src::Input(1)])?
        } else {
            Src::Input(0)
        };
        let ltype = DType::I64;
        let out = match (self.kind, self.use_length) {
            (Kind::Mask, false) => Src::Input(0),
            (Kind::Mask, true) => self.mask(&mut b, data, len, types[0])?,
            (Kind::Reverse, false) => {
                b.op("reverse", &[("axis", "(0,)".into())], &[Src::Input(0)])?
            }
            (Kind::Last, false) => {
                let last = b.op(
                    "slice_axis",
                    &[
                        ("axis", ta.to_string()),
                        ("begin", (t as i64 - 1).to_string()),
                        ("end", t.to_string()),
                    ],
                    &[Src::Input(0)],
                )?;
                b.reshape(last, &self.output_shape(data))?
            }
            (Kind::Last, true) => {
                let last = b.scalar("_minus_scalar", len, 1.0)?;
                self.gather(&mut b, last, last, n, ltype)?
            }
            (Kind::Reverse, true) => {
                // Step t of sample n reads step len[n] - 1 - t while t < len[n].
                let steps = self.steps(&mut b, t, ltype)?;
                let len = self.lengths(&mut b, len, n)?;
                let inside = b.binary("broadcast_lesser", steps, len)?;
                let last = b.scalar("_minus_scalar", len, 1.0)?;
                let mirrored = b.binary("broadcast_sub", last, steps)?;
                let same = b.binary("broadcast_like", steps, mirrored)?;
                let time = b.op("where", &[], &[inside, mirrored, same])?;
                self.gather(&mut b, time, time, n, ltype)?
            }
        };
        b.finish(vec![out])
    }
}

const PARAMS: &[Param] = &[
    Param::new(
        "use_sequence_length",
        "boolean",
        "False",
        "If set to true, this layer takes in an extra input parameter `sequence_length` to specify variable length sequence",
    ),
    Param::new("axis", "int", "0", "The sequence axis. Only values of 0 and 1 are currently supported."),
];

const MASK_PARAMS: &[Param] = &[
    Param::new(
        "use_sequence_length",
        "boolean",
        "False",
        "If set to true, this layer takes in an extra input parameter `sequence_length` to specify variable length sequence",
    ),
    Param::new("value", "float", "0", "The value to be used as a mask."),
    Param::new("axis", "int", "0", "The sequence axis. Only values of 0 and 1 are currently supported."),
];

fn create(kind: Kind, attrs: &Attrs) -> Result<OpRef> {
    let decls = if kind == Kind::Mask {
        MASK_PARAMS
    } else {
        PARAMS
    };
    let p = Params::declared(kind.name(), attrs, decls)?;
    let axis: i64 = p.get("axis")?;
    if axis != 0 && (axis != 1 || kind == Kind::Reverse) {
        return Err(Error::Value(format!(
            "{}: axis must be 0{}, got {axis}",
            kind.name(),
            if kind == Kind::Reverse { "" } else { " or 1" }
        )));
    }
    Ok(Arc::new(Sequence {
        kind,
        use_length: p.get("use_sequence_length")?,
        value: if kind == Kind::Mask {
            p.get("value")?
        } else {
            0.0
        },
        axis: axis as usize,
    }))
}

/// Registers `SequenceMask`, `SequenceLast` and `SequenceReverse`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "SequenceMask",
        aliases: &[],
        inputs: &["data", "sequence_length"],
        variadic: false,
        params: MASK_PARAMS,
        doc: "Sets the steps past each sample's length to a value.",
        create: Box::new(|a| create(Kind::Mask, a)),
    });
    r.add(OpDef {
        name: "SequenceLast",
        aliases: &[],
        inputs: &["data", "sequence_length"],
        variadic: false,
        params: PARAMS,
        doc: "The last step of each sample's sequence.",
        create: Box::new(|a| create(Kind::Last, a)),
    });
    r.add(OpDef {
        name: "SequenceReverse",
        aliases: &[],
        inputs: &["data", "sequence_length"],
        variadic: false,
        params: PARAMS,
        doc: "Reverses the first length steps of each sample's sequence.",
        create: Box::new(|a| create(Kind::Reverse, a)),
    });
}

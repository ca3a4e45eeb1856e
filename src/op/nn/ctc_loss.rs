//! Definition of `CTCLoss`: the connectionist temporal classification loss of each
//! sequence of un-normalised activations against its label; the gradient with respect to
//! the activations is computed with the loss, as a hidden output the backward scales.

use super::common::check_float;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{
    check_inputs, shape_err, Attrs, Grad, Gradient, OpDef, OpRef, Operator, Param, Params, Registry,
};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

pub(crate) const NAME: &str = "CTCLoss";

const PARAMS: &[Param] = &[
    Param::new(
        "use_data_lengths",
        "boolean",
        "False",
        "Whether each sequence's length is given by the `data_lengths` input; otherwise every sequence is as long as the data.",
    ),
    Param::new(
        "use_label_lengths",
        "boolean",
        "False",
        "Whether each label's length is given by the `label_lengths` input; otherwise a label ends at its first padding value (0 when the blank is first, -1 when it is last).",
    ),
    Param::new(
        "blank_label",
        "{'first', 'last'}",
        "'first'",
        "Which class is the blank: the first (labels are 1 to alphabet_size-1, padded with 0) or the last (labels are 0 to alphabet_size-2, padded with -1).",
    ),
];

/// `CTCLoss`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CtcLoss {
    pub(crate) use_data_lengths: bool,
    pub(crate) use_label_lengths: bool,
    /// The blank is the last class (its padding value -1) rather than the first (0).
    pub(crate) blank_last: bool,
}

impl CtcLoss {
    /// The blank's class among `classes`.
    pub(crate) fn blank(&self, classes: usize) -> usize {
        if self.blank_last {
            classes.saturating_sub(1)
        } else {
            0
        }
    }

    /// The label value that ends a label when the lengths are not given.
    pub(crate) fn padding(&self) -> i64 {
        if self.blank_last {
            -1
        } else {
            0
        }
    }

    /// The index of the `label_lengths` input, if any.
    pub(crate) fn label_lengths_input(&self) -> Option<usize> {
        self.use_label_lengths
            .then_some(2 + usize::from(self.use_data_lengths))
    }

    fn num_inputs(&self) -> usize {
        2 + usize::from(self.use_data_lengths) + usize::from(self.use_label_lengths)
    }
}

/// A length or label value as MXNet reads it: rounded half away from zero.
fn rounded(v: f64) -> i64 {
    v.round() as i64
}

/// One sequence's length and label, checked against the data.
pub(crate) struct Sequence {
    pub(crate) steps: usize,
    pub(crate) labels: Vec<usize>,
}

impl CtcLoss {
    /// Each sequence's length and label, for data of shape `data` (steps, batch, classes),
    /// from the label rows and the lengths given (all as `f64`); a length outside the data
    /// or a label outside the alphabet is an error.
    pub(crate) fn sequences(
        &self,
        data: &[usize],
        label: &[f64],
        data_lengths: Option<&[f64]>,
        label_lengths: Option<&[f64]>,
    ) -> Result<Vec<Sequence>> {
        let (steps, batch, classes) = (data[0], data[1], data[2]);
        let width = label.len().checked_div(batch).unwrap_or(0);
        let blank = self.blank(classes);
        (0..batch)
            .map(|n| {
                let tb = data_lengths.map_or(steps as i64, |l| rounded(l[n]));
                if !(0..=steps as i64).contains(&tb) {
                    return Err(Error::Value(format!(
                        "{NAME}: data_lengths[{n}] is {}, outside the sequence length 0..={steps}",
                        data_lengths.map_or(0.0, |l| l[n])
                    )));
                }
                let row = &label[n * width..(n + 1) * width];
                let len = match label_lengths {
                    Some(l) => {
                        let len = rounded(l[n]);
                        if !(0..=width as i64).contains(&len) {
                            return Err(Error::Value(format!(
                                "{NAME}: label_lengths[{n}] is {}, outside the label width 0..={width}",
                                l[n]
                            )));
                        }
                        len as usize
                    }
                    None => row
                        .iter()
                        .position(|&v| rounded(v) == self.padding())
                        .unwrap_or(width),
                };
                let labels = row[..len]
                    .iter()
                    .map(|&v| {
                        let c = rounded(v);
                        if (0..classes as i64).contains(&c) {
                            Ok(c as usize)
                        } else {
                            Err(Error::Value(format!(
                                "{NAME}: label {v} of sequence {n} is outside the alphabet 0..{classes} (blank {blank})"
                            )))
                        }
                    })
                    .collect::<Result<Vec<usize>>>()?;
                Ok(Sequence {
                    steps: tb as usize,
                    labels,
                })
            })
            .collect()
    }
}

impl Operator for CtcLoss {
    fn name(&self) -> &'static str {
        NAME
    }

    fn num_outputs(&self) -> usize {
        2
    }

    fn num_visible_outputs(&self) -> usize {
        1
    }

    fn optional_outputs(&self) -> &'static [usize] {
        &[1]
    }

    fn input_names(&self) -> Option<Vec<String>> {
        let mut names = vec!["data".to_string(), "label".to_string()];
        if self.use_data_lengths {
            names.push("data_lengths".into());
        }
        if self.use_label_lengths {
            names.push("label_lengths".into());
        }
        Some(names)
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        check_inputs(NAME, inputs, self.num_inputs())?;
        let (d, l) = (&inputs[0], &inputs[1]);
        if d.len() != 3 {
            return Err(shape_err(
                NAME,
                "data must be 3-D (sequence length, batch, alphabet size)",
                d,
            ));
        }
        if l.len() != 2 {
            return Err(shape_err(
                NAME,
                "label must be 2-D (batch, label length)",
                l,
            ));
        }
        if d[1] != l[0] {
            return Err(Error::Value(format!(
                "{NAME}: data {} and label {} differ in batch size",
                fmt_shape(d),
                fmt_shape(l)
            )));
        }
        if l[1] > d[0] {
            return Err(Error::Value(format!(
                "{NAME}: labels of length {} cannot fit sequences of length {} (data {}, label {})",
                l[1],
                d[0],
                fmt_shape(d),
                fmt_shape(l)
            )));
        }
        for (i, lengths) in inputs.iter().enumerate().skip(2) {
            let what = if Some(i) == self.label_lengths_input() {
                "label_lengths"
            } else {
                "data_lengths"
            };
            if lengths.len() != 1 || lengths[0] != d[1] {
                return Err(shape_err(
                    NAME,
                    &format!("{what} must be a vector of the batch size {}", d[1]),
                    lengths,
                ));
            }
        }
        Ok(vec![Shape::from_slice(&[d[1]]), d.clone()])
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        check_float(NAME, "data", inputs[0])?;
        for (i, &t) in inputs.iter().enumerate().skip(1) {
            if t == DType::Bool {
                return Err(Error::Type(format!(
                    "{NAME}: input {i} must be numeric, got bool"
                )));
            }
        }
        Ok(vec![inputs[0]; 2])
    }

    fn infer_type_partial(
        &self,
        inputs: &mut crate::op::TypeSlots,
        outputs: &mut crate::op::TypeSlots,
    ) -> Result<()> {
        // Labels and lengths keep their own types; unknown ones default to the data's.
        if let Some(t) = inputs[0] {
            for i in inputs.iter_mut().skip(1).filter(|i| i.is_none()) {
                *i = Some(t);
            }
            let known: Vec<DType> = inputs.iter().map(|i| i.unwrap_or(t)).collect();
            for (o, t) in outputs.iter_mut().zip(self.infer_type(&known)?) {
                *o = Some(t);
            }
        }
        Ok(())
    }

    fn gradient(&self) -> Grad {
        Grad::Op(Gradient {
            op: Arc::new(CtcLossBackward),
            ograds: vec![0],
            inputs: vec![],
            outputs: vec![1],
            grad_of: vec![0],
        })
    }
}

/// `_backward_ctc_loss`: the gradient computed with the loss, scaled per sequence by the
/// loss's gradient.
pub(crate) struct CtcLossBackward;

impl Operator for CtcLossBackward {
    fn name(&self) -> &'static str {
        "_backward_ctc_loss"
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let name = self.name();
        check_inputs(name, inputs, 2)?;
        let (og, g) = (&inputs[0], &inputs[1]);
        if og.len() != 1 || g.len() != 3 || og[0] != g[1] {
            return Err(Error::Value(format!(
                "{name}: the loss gradient {} does not match the gradient {}",
                fmt_shape(og),
                fmt_shape(g)
            )));
        }
        Ok(vec![g.clone()])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared(NAME, attrs, PARAMS)?;
    Ok(Arc::new(CtcLoss {
        use_data_lengths: p.get("use_data_lengths")?,
        use_label_lengths: p.get("use_label_lengths")?,
        blank_last: p.get_choice("blank_label", &["first", "last"])? == "last",
    }))
}

/// Registers `CTCLoss`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: NAME,
        aliases: &["ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"],
        inputs: &["data", "label", "data_lengths", "label_lengths"],
        variadic: false,
        params: PARAMS,
        doc: "Connectionist Temporal Classification loss of un-normalised activations against labels.",
        create: Box::new(create),
    });
}

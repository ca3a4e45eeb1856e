//! Definition of `UpSampling`: nearest-neighbour (repeats, several inputs concatenated or
//! summed) or bilinear (a grouped `Deconvolution` with the given weight).

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::composite::{tuple_attr, Builder, Composite, Decomposition, Src};
use crate::op::{Attrs, OpDef, OpRef, Operator, Param, Params, Registry};
use crate::shape::{fmt_shape, Shape};
use std::sync::Arc;

const PARAMS: &[Param] = &[
    Param::required("scale", "int", "Up sampling scale"),
    Param::new("num_filter", "int", "0", "Input filter. Only used by bilinear sample_type.Since bilinear upsampling uses deconvolution, num_filters is set to the number of channels."),
    Param::required("sample_type", "{'bilinear', 'nearest'}", "upsampling method"),
    Param::new(
        "multi_input_mode",
        "{'concat', 'sum'}",
        "'concat'",
        "How to handle multiple input. concat means concatenate upsampled images along the channel dimension. sum means add all images together, only available for nearest neighbor upsampling.",
    ),
    Param::required("num_args", "int", "Number of inputs to be upsampled. For nearest neighbor upsampling, this can be 1-N; the size of output will be(scale*h_0,scale*w_0) and all other inputs will be upsampled to thesame size. For bilinear upsampling this must be 2; 1 input and 1 weight."),
    Param::new("workspace", "long (non-negative)", "512", "Tmp workspace for deconvolution (MB)"),
];

/// `UpSampling`.
struct UpSampling {
    scale: usize,
    nearest: bool,
    sum: bool,
    num_args: usize,
}

impl UpSampling {
    fn kernel(&self) -> usize {
        2 * self.scale - self.scale % 2
    }

    fn check4(&self, s: &Shape) -> Result<()> {
        if s.len() != 4 {
            return Err(Error::Value(format!(
                "UpSampling: inputs must be 4-D (batch, channel, height, width), got shape {}",
                fmt_shape(s)
            )));
        }
        Ok(())
    }

    /// The output shape, checking every input against the first.
    fn output(&self, inputs: &[Shape]) -> Result<Shape> {
        let d = &inputs[0];
        self.check4(d)?;
        let (oh, ow) = (d[2] * self.scale, d[3] * self.scale);
        let mut channels = if self.nearest { 0 } else { d[1] };
        if self.nearest {
            for s in inputs {
                self.check4(s)?;
                if s[2] == 0 || s[3] == 0 || oh % s[2] != 0 || ow % s[3] != 0 {
                    return Err(Error::Value(format!(
                        "UpSampling: input of shape {} does not divide the output size ({oh}, {ow})",
                        fmt_shape(s)
                    )));
                }
                if self.sum {
                    if channels != 0 && channels != s[1] {
                        return Err(Error::Value(
                            "UpSampling: with multi_input_mode='sum' every input must have the same channels".into(),
                        ));
                    }
                    channels = s[1];
                } else {
                    channels += s[1];
                }
            }
        }
        Ok(Shape::from_slice(&[d[0], channels, oh, ow]))
    }
}

impl Operator for UpSampling {
    fn name(&self) -> &'static str {
        "UpSampling"
    }

    fn input_names(&self) -> Option<Vec<String>> {
        Some(if self.nearest {
            (0..self.num_args).map(|i| format!("arg{i}")).collect()
        } else {
            vec!["data".into(), "weight".into()]
        })
    }

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
        let want = if self.nearest { self.num_args } else { 2 };
        crate::op::check_inputs("UpSampling", inputs, want)?;
        Ok(vec![self.output(inputs)?])
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut crate::op::ShapeSlots,
        outputs: &mut crate::op::ShapeSlots,
    ) -> Result<()> {
        if !self.nearest {
            if let Some(d) = inputs[0].clone() {
                self.check4(&d)?;
                let k = self.kernel();
                let w = Shape::from_slice(&[d[1], 1, k, k]);
                crate::op::assign_shape("UpSampling", "weight", &mut inputs[1], &w)?;
            }
        }
        crate::op::infer::outputs_once_inputs_known(self, inputs, outputs)
    }

    fn as_composite(&self) -> Option<&dyn Composite> {
        Some(self)
    }
}

impl Composite for UpSampling {
    fn decompose(&self, shapes: &[Shape], _types: &[DType]) -> Result<Decomposition> {
        let out = self.output(shapes)?;
        let mut b = Builder::new();
        if !self.nearest {
            let (k, s) = (self.kernel() as i64, self.scale as i64);
            let pad = s / 2;
            let c = shapes[0][1].to_string();
            let y = b.op(
                "Deconvolution",
                &[
                    ("kernel", tuple_attr(&[k, k])),
                    ("stride", tuple_attr(&[s, s])),
                    ("pad", tuple_attr(&[pad, pad])),
                    ("num_filter", c.clone()),
                    ("num_group", c),
                    ("no_bias", "true".into()),
                ],
                &[Src::Input(0), Src::Input(1)],
            )?;
            return b.finish(vec![y]);
        }
        let mut parts = Vec::new();
        for (i, s) in shapes.iter().enumerate() {
            let (fy, fx) = (out[2] / s[2], out[3] / s[3]);
            let mut x = Src::Input(i);
            if fy > 1 {
                x = b.op(
                    "repeat",
                    &[("repeats", fy.to_string()), ("axis", "2".into())],
                    &[x],
                )?;
            }
            if fx > 1 {
                x = b.op(
                    "repeat",
                    &[("repeats", fx.to_string()), ("axis", "3".into())],
                    &[x],
                )?;
            }
            parts.push(x);
        }
        let y = match (parts.len(), self.sum) {
            (1, _) => parts[0],
            (n, true) => b.op("add_n", &[("num_args", n.to_string())], &parts)?,
            (n, false) => b.op(
                "Concat",
                &[("dim", "1".into()), ("num_args", n.to_string())],
                &parts,
            )?,
        };
        b.finish(vec![y])
    }
}

fn create(attrs: &Attrs) -> Result<OpRef> {
    let p = Params::declared("UpSampling", attrs, PARAMS)?;
    let scale: usize = p.get("scale")?;
    if scale == 0 {
        return Err(Error::Value("UpSampling: scale must be positive".into()));
    }
    let nearest = p.get_choice("sample_type", &["bilinear", "nearest"])? == "nearest";
    let num_args: usize = p.get("num_args")?;
    if num_args == 0 {
        return Err(Error::Value("UpSampling: num_args must be positive".into()));
    }
    Ok(Arc::new(UpSampling {
        scale,
        nearest,
        sum: p.get_choice("multi_input_mode", &["concat", "sum"])? == "sum",
        num_args,
    }))
}

/// Registers `UpSampling`.
pub fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "UpSampling",
        aliases: &[],
        inputs: &["data"],
        variadic: true,
        params: PARAMS,
        doc: "Upsamples 4-D images by nearest-neighbour repetition or bilinear interpolation.",
        create: Box::new(create),
    });
}

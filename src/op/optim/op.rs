//! The update operator's definition: shape and type checks of weight, gradient and
//! states.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::infer::infer_from_partial;
use crate::op::optim::spec::{Hyper, Kind};
use crate::op::{assign_shape, infer, Operator, ShapeSlots, TypeSlots};
use crate::shape::fmt_shape;

/// One fused optimizer update with its hyperparameters.
pub struct UpdateOp {
    pub kind: Kind,
    pub h: Hyper,
}

pub(crate) fn is_float(t: DType) -> bool {
    matches!(t, DType::F16 | DType::F32 | DType::F64)
}

impl Operator for UpdateOp {
    fn name(&self) -> &'static str {
        self.kind.spec().name
    }

    /// Every input and the output share the weight's shape.
    fn infer_shape_partial(&self, inputs: &mut ShapeSlots, outputs: &mut ShapeSlots) -> Result<()> {
        let spec = self.kind.spec();
        if inputs.len() != spec.inputs.len() {
            return Err(Error::Value(format!(
                "{}: expected {} inputs ({}), got {}",
                spec.name,
                spec.inputs.len(),
                spec.inputs.join(", "),
                inputs.len()
            )));
        }
        let (inputs, scale) = inputs.split_at_mut(spec.inputs.len() - spec.scale_input as usize);
        if let Some(slot) = scale.first_mut() {
            match slot {
                Some(s) if s.iter().product::<usize>() != 1 => {
                    return Err(Error::Value(format!(
                        "{}: rescale_grad must hold one value, got shape {}",
                        spec.name,
                        fmt_shape(s)
                    )))
                }
                Some(_) => {}
                None => *slot = Some(crate::shape::Shape::from_slice(&[1])),
            }
        }
        let Some((known_name, known)) = spec
            .inputs
            .iter()
            .zip(inputs.iter())
            .chain(std::iter::once((&"output", &outputs[0])))
            .find_map(|(n, s)| s.as_ref().map(|s| (*n, s.clone())))
        else {
            return Ok(());
        };
        for (name, slot) in spec.inputs.iter().zip(inputs.iter_mut()) {
            match slot {
                Some(s) if *s != known => {
                    return Err(Error::Value(format!(
                        "{}: {name} has shape {} but {known_name} has shape {}",
                        spec.name,
                        fmt_shape(s),
                        fmt_shape(&known)
                    )))
                }
                Some(_) => {}
                None => *slot = Some(known.clone()),
            }
        }
        assign_shape(spec.name, "output 0", &mut outputs[0], &known)
    }

    infer_from_partial!(shape);

    /// The weight's type is a float type, shared by the gradient, the states and the
    /// output; mixed-precision copies and `rescale_grad` are float32.
    fn infer_type_partial(&self, inputs: &mut TypeSlots, outputs: &mut TypeSlots) -> Result<()> {
        let spec = self.kind.spec();
        let mp = spec
            .mp_from
            .unwrap_or(spec.inputs.len() - spec.scale_input as usize)
            .min(inputs.len());
        let Some(w) = infer::first_known(&inputs[..mp], outputs) else {
            for slot in inputs.iter_mut().skip(mp) {
                slot.get_or_insert(DType::F32);
            }
            return Ok(());
        };
        if !is_float(w) {
            return Err(Error::Type(format!(
                "{}: weight must be float16, float32 or float64, got {w}",
                spec.name
            )));
        }
        for (i, (name, slot)) in spec.inputs.iter().zip(inputs.iter_mut()).enumerate() {
            let want = if i < mp { w } else { DType::F32 };
            match slot {
                Some(t) if *t != want => {
                    return Err(Error::Type(format!(
                        "{}: {name} has dtype {t} but must be {want} (weight has dtype {w})",
                        spec.name
                    )))
                }
                _ => *slot = Some(want),
            }
        }
        match outputs[0] {
            Some(o) if o != w => Err(Error::Type(format!(
                "{}: output must have dtype {w}, got {o}",
                spec.name
            ))),
            _ => {
                outputs[0] = Some(w);
                Ok(())
            }
        }
    }

    infer_from_partial!(type);

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn aux_inputs(&self) -> Vec<usize> {
        self.kind.spec().aux.to_vec()
    }
}

//! The update operator's definition: shape and type checks of weight, gradient and
//! states.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::optim::spec::{Hyper, Kind};
use crate::op::Operator;
use crate::shape::{fmt_shape, Shape};

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

    fn infer_shape(&self, inputs: &[Shape]) -> Result<Vec<Shape>> {
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
        for (name, s) in spec.inputs.iter().zip(inputs).skip(1) {
            if s != &inputs[0] {
                return Err(Error::Value(format!(
                    "{}: {name} has shape {} but weight has shape {}",
                    spec.name,
                    fmt_shape(s),
                    fmt_shape(&inputs[0])
                )));
            }
        }
        Ok(vec![inputs[0].clone()])
    }

    fn infer_shape_partial(
        &self,
        inputs: &mut [Option<Shape>],
        outputs: &mut [Option<Shape>],
    ) -> Result<()> {
        crate::op::infer::same_shape(self.name(), inputs, outputs)
    }

    fn infer_type(&self, inputs: &[DType]) -> Result<Vec<DType>> {
        let spec = self.kind.spec();
        let w = inputs[0];
        let mp = spec.mp_from.unwrap_or(spec.inputs.len());
        if !is_float(w) {
            return Err(Error::Type(format!(
                "{}: weight must be float16, float32 or float64, got {w}",
                spec.name
            )));
        }
        for (i, (name, t)) in spec.inputs.iter().zip(inputs).enumerate() {
            let want = if i < mp { w } else { DType::F32 };
            if *t != want {
                return Err(Error::Type(format!(
                    "{}: {name} has dtype {t} but must be {want} (weight has dtype {w})",
                    spec.name
                )));
            }
        }
        Ok(vec![w])
    }

    fn infer_type_partial(
        &self,
        inputs: &mut [Option<DType>],
        outputs: &mut [Option<DType>],
    ) -> Result<()> {
        let spec = self.kind.spec();
        let mp = spec.mp_from.unwrap_or(spec.inputs.len());
        for slot in inputs.iter_mut().skip(mp) {
            slot.get_or_insert(DType::F32);
        }
        let known = inputs[..mp]
            .iter()
            .chain(outputs.iter())
            .flatten()
            .next()
            .copied();
        if let Some(t) = known {
            for slot in inputs[..mp].iter_mut().chain(outputs.iter_mut()) {
                slot.get_or_insert(t);
            }
            let ins: Vec<DType> = inputs.iter().flatten().copied().collect();
            let out = self.infer_type(&ins)?;
            if outputs[0] != Some(out[0]) {
                return Err(Error::Type(format!(
                    "{}: output must have dtype {}, got {:?}",
                    spec.name, out[0], outputs[0]
                )));
            }
        }
        Ok(())
    }

    fn inplace(&self) -> &'static [(usize, usize)] {
        &[(0, 0)]
    }

    fn aux_inputs(&self) -> Vec<usize> {
        self.kind.spec().aux.to_vec()
    }
}

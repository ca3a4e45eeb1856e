//! Fused optimizer updates (`sgd_update`, `adam_update`, ...): one element-wise pass that
//! updates a weight and its optimizer states in place, as MXNet 1.9.1 computes them.

pub mod elem;
mod op;
pub mod spec;
#[cfg(test)]
mod tests;

pub use op::UpdateOp;
pub use spec::{Hyper, Kind};

use crate::error::Result;
use crate::op::{Attrs, OpDef, OpRef, ParamList, Registry};
use std::sync::Arc;

/// The update operator of `kind` with hyperparameters `h`, for callers in the core.
pub fn update_op(kind: Kind, h: Hyper) -> OpRef {
    Arc::new(UpdateOp { kind, h })
}

fn create(kind: Kind, attrs: &Attrs) -> Result<OpRef> {
    Ok(update_op(kind, Hyper::parse(kind, attrs)?))
}

/// Registers every update operator.
pub fn register(r: &mut Registry) {
    for kind in Kind::ALL {
        let spec = kind.spec();
        r.add(OpDef {
            name: spec.name,
            aliases: &[],
            inputs: spec.inputs,
            variadic: false,
            params: ParamList::Names(spec.params),
            doc: spec.doc,
            create: Box::new(move |a| create(kind, a)),
        });
    }
}

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    op::register_kernels(k);
}

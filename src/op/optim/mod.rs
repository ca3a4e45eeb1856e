//! Definitions of the fused optimizer updates: one element-wise pass that updates a
//! weight and its optimizer states in place, as MXNet 1.9.1 computes them.

pub mod lamb;
pub mod lars;
pub mod multi;
pub mod op;
pub mod spec;

use crate::error::Result;
use crate::op::{Attrs, OpDef, OpRef, Registry};
pub use multi::{MultiKind, MultiUpdateOp};
pub use op::UpdateOp;
pub use spec::{Hyper, Kind};
use std::sync::Arc;

/// The update operator of `kind` with hyperparameters `h`, for callers in the core.
pub fn update_op(kind: Kind, h: Hyper) -> OpRef {
    Arc::new(UpdateOp { kind, h })
}

pub(crate) fn create(kind: Kind, attrs: &Attrs) -> Result<OpRef> {
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
            params: spec.params,
            doc: spec.doc,
            create: Box::new(move |a| create(kind, a)),
        });
    }
    for kind in MultiKind::ALL {
        let spec = kind.spec();
        r.add(OpDef {
            name: spec.name,
            aliases: &[],
            inputs: &["data"],
            variadic: true,
            params: spec.params,
            doc: spec.doc,
            create: Box::new(move |a| Ok(Arc::new(MultiUpdateOp::parse(kind, a)?) as OpRef)),
        });
    }
    lamb::register(r);
    lars::register(r);
}

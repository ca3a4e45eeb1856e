//! CPU kernels, grouped by operator family; each family registers its operators.

pub mod add_n;
pub mod binary;
pub mod fastmath;
pub mod grad;
pub mod indexing;
pub mod infer;
pub mod init;
pub mod linalg;
pub mod map;
pub mod nn;
pub mod num;
pub mod optim;
pub mod random;
pub mod reduce;
pub mod sorting;
pub mod transform;
pub mod unary;

use crate::op::Registry;

/// Registers every CPU operator family.
pub fn register_all(r: &mut Registry) {
    add_n::register(r);
    unary::register(r);
    binary::register(r);
    init::register(r);
    reduce::register(r);
    linalg::register(r);
    transform::register(r);
    indexing::register(r);
    sorting::register(r);
    random::register(r);
    nn::register(r);
    optim::register(r);
}

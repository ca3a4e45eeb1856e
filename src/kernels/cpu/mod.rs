//! CPU kernels, grouped by operator family; each family registers its operators.

pub mod binary;
pub mod map;
pub mod num;
pub mod unary;

use crate::op::Registry;

/// Registers every CPU operator family.
pub fn register_all(r: &mut Registry) {
    unary::register(r);
    binary::register(r);
}

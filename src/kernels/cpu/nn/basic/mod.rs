//! Basic network layers: dense layers, activations, softmax, losses, dropout and
//! embeddings, each with its backward operator.

pub mod common;
pub mod dense;

use crate::op::Registry;

/// Registers this family's operators.
pub fn register(r: &mut Registry) {
    dense::register(r);
}

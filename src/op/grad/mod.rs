//! Backward operators: the definitions of the operators that compute input gradients
//! from output gradients, one module per forward family. Forward operators hand them out
//! through `Operator::gradient`.

pub mod binary;
pub mod elemwise;
pub mod indexing;
pub mod join;
pub mod linalg;
pub mod reduce;
pub mod view;

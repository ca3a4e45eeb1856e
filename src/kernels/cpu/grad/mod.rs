//! Backward operators: the kernels that compute input gradients from output gradients,
//! one module per forward family. They are not registered; forward operators hand them
//! out through `Operator::gradient`.

#[cfg(test)]
pub mod testing;

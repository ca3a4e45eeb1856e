//! CPU kernels of convolution, deconvolution, pooling and batch normalisation, each with
//! its backward.

/// Runs `$body` with `$T` bound to the element type of a float dtype; other dtypes are an
/// error naming the op.
macro_rules! dispatch_float {
    ($op:expr, $dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::dtype::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::dtype::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::dtype::DType::F16 => {
                type $T = half::f16;
                $body
            }
            other => {
                return Err($crate::error::Error::Type(format!(
                    "{}: dtype {} is not supported",
                    $op, other
                )))
            }
        }
    };
}

mod batch;
mod batch_norm;
mod convolution;
mod deconvolution;
mod im2col;
mod layer;
mod pooling;
#[cfg(test)]
mod tests;
mod workspace;

/// Registers the CPU kernels of this family.
pub(crate) fn register_kernels(k: &mut crate::kernels::Kernels) {
    batch_norm::register_kernels(k);
    convolution::register_kernels(k);
    deconvolution::register_kernels(k);
    pooling::register_kernels(k);
}

//! CPU kernels of `shape_array` and `size_array`.

use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::array_info::ArrayInfo;
use crate::op::OpContext;

impl CpuKernel for ArrayInfo {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if let Some(values) = self.values(io.req[0], &io.inputs[0].shape)? {
            io.outputs[0].slice_mut::<i64>().copy_from_slice(&values);
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<ArrayInfo>(k);
}

#[cfg(test)]
mod tests {
    use crate::op::testutil::{f32a, run, values};

    #[test]
    fn shape_and_size() {
        let x = f32a(&[2, 3, 4], &[0.0; 24]);
        let s = &run("shape_array", &[], std::slice::from_ref(&x))[0];
        assert_eq!(s.shape(), &[3]);
        assert_eq!(values::<i64>(s), vec![2, 3, 4]);
        let n = &run("size_array", &[], &[x])[0];
        assert_eq!(values::<i64>(n), vec![24]);
    }
}

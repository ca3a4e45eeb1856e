//! GPU kernels of `shape_array` and `size_array`: the values, known on the host, are
//! copied to the device on the op's stream.

use crate::error::Result;
use crate::kernels::cpu::Blobs;
use crate::op::array_info::ArrayInfo;
use crate::op::OpContext;

impl super::GpuKernel for ArrayInfo {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let Some(values) = self.values(io.req[0], &io.inputs[0].shape)? else {
            return Ok(());
        };
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        crate::cuda::memcpy::host_to_device(ctx.device, ctx.stream, io.outputs[0].ptr(), &bytes)
    }
}

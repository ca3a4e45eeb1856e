//! GPU kernels of `Pooling` and its backward (`pool.cu`): one output per thread forward,
//! and backward a gather in which each input element sums what the outputs covering it
//! send, so no atomics are needed; max pooling first writes each output's route (from the
//! index output, or found again) to scratch memory.

use super::conv::dims;
use super::launch::{float_suffix, launch_n, Args};
use super::temp::Temp;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::cpu::Blobs;
use crate::kernels::Kernels;
use crate::op::nn::geometry::volume;
use crate::op::nn::pooling::{Plan, PoolType, Pooling, PoolingBackward};
use crate::op::{OpContext, OpReq};

const MODULE: &str = "pool";

/// `struct rsmx_pool_geom`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Geom {
    input: [i32; 3],
    output: [i32; 3],
    kernel: [i32; 3],
    stride: [i32; 3],
    pad: [i32; 3],
    pool: i32,
    include_pad: i32,
    p_value: i32,
}

impl Geom {
    fn new(op: &str, p: &Plan, fwd: &Pooling) -> Result<Geom> {
        let (pool, p_value) = match fwd.pool {
            PoolType::Max => (0, 1),
            PoolType::Avg => (1, 1),
            PoolType::Sum => (2, 1),
            PoolType::Lp(v) => (3, v as i32),
        };
        Ok(Geom {
            input: dims(op, &p.input)?,
            output: dims(op, &p.output)?,
            kernel: dims(op, &p.kernel)?,
            stride: dims(op, &p.stride)?,
            pad: dims(op, &p.pad)?,
            pool,
            include_pad: i32::from(fwd.count_include_pad),
            p_value,
        })
    }
}

/// True when every offset of a plane of `len` elements is exact in `dtype` (as the CPU
/// kernel decides whether the index output can be read back).
fn offsets_exact(dtype: DType, len: usize) -> bool {
    let eps: f64 = match dtype {
        DType::F16 => 2f64.powi(-10),
        DType::F32 => f32::EPSILON as f64,
        _ => f64::EPSILON,
    };
    (len as f64) <= 2.0 / eps
}

impl super::GpuKernel for Pooling {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let name = "Pooling";
        let p = self.plan(&io.inputs[0].shape)?;
        let geo = Geom::new(name, &p, self)?;
        let sfx = float_suffix(name, io.inputs[0].dtype)?;
        let with_index = io.outputs.len() > 1 && io.req.get(1).is_some_and(|r| *r != OpReq::Null);
        let at = if with_index {
            io.outputs[1].ptr()
        } else {
            std::ptr::null_mut()
        };
        let n = p.planes * volume(&p.output);
        let args = Args::new()
            .ptr(io.outputs[0].ptr())
            .ptr(at)
            .ptr(io.inputs[0].ptr())
            .arg(n as i64)
            .arg(geo)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, MODULE, &format!("pool_{sfx}"), n, args)
    }
}

impl super::GpuKernel for PoolingBackward {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let name = "_backward_Pooling";
        let p = self.fwd.plan(&io.inputs[1].shape)?;
        let geo = Geom::new(name, &p, &self.fwd)?;
        let dtype = io.inputs[1].dtype;
        let sfx = float_suffix(name, dtype)?;
        let (dy, x, y) = (io.inputs[0].ptr(), io.inputs[1].ptr(), io.inputs[2].ptr());
        let n_out = p.planes * volume(&p.output);
        let n_in = p.planes * volume(&p.input);
        let mut routes = None;
        if self.fwd.pool == PoolType::Max && n_out > 0 {
            let at = if io.inputs.len() == 4 && offsets_exact(dtype, volume(&p.input)) {
                io.inputs[3].ptr()
            } else {
                std::ptr::null_mut()
            };
            let t = Temp::new(ctx, n_out * std::mem::size_of::<i64>())?;
            let args = Args::new()
                .ptr(t.ptr())
                .ptr(at)
                .ptr(x)
                .ptr(y)
                .arg(n_out as i64)
                .arg(geo);
            launch_n(ctx, MODULE, &format!("pool_route_{sfx}"), n_out, args)?;
            routes = Some(t);
        }
        let route = routes.as_ref().map_or(std::ptr::null_mut(), Temp::ptr);
        let args = Args::new()
            .ptr(io.outputs[0].ptr())
            .ptr(dy)
            .ptr(x)
            .ptr(y)
            .ptr(route)
            .arg(n_in as i64)
            .arg(geo)
            .arg(i32::from(io.req[0] == OpReq::Add));
        launch_n(ctx, MODULE, &format!("pool_backward_{sfx}"), n_in, args)
    }
}

/// Registers the GPU kernels of pooling.
pub fn register_kernels(k: &mut Kernels) {
    super::add::<Pooling>(k);
    super::add::<PoolingBackward>(k);
}

//! Updates run at once on host memory, on the calling thread and outside the engine: a
//! KVStore server's values are plain bytes that only its own thread touches, so its
//! optimizer changes them in place instead of through arrays the engine orders.

use super::fused::FusedOptimizer;
use super::ParamKey;
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::{run_kernel, Blobs};
use crate::ndarray::TBlob;
use crate::op::{self, Attrs, OpContext, OpRef, OpReq};
use crate::shape::Shape;

/// A zero-filled host array of one dtype, aligned for every element type.
pub struct HostArray {
    words: Vec<u64>,
    len: usize,
    dtype: DType,
}

impl HostArray {
    /// `len` zeros of `dtype`.
    pub fn zeros(len: usize, dtype: DType) -> HostArray {
        let bytes = len * dtype.size();
        HostArray {
            words: vec![0; bytes.div_ceil(8)],
            len,
            dtype,
        }
    }

    /// A copy of `bytes`, whole elements of `dtype`.
    pub fn copy_of(bytes: &[u8], dtype: DType) -> HostArray {
        let mut a = HostArray::zeros(bytes.len() / dtype.size(), dtype);
        a.bytes_mut().copy_from_slice(bytes);
        a
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len * self.dtype.size()]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.dtype.size();
        &mut bytemuck::cast_slice_mut(&mut self.words)[..n]
    }

    /// A kernel's view of the array, valid while the array is neither moved nor dropped.
    pub fn blob(&mut self) -> TBlob {
        let ptr = self.words.as_mut_ptr().cast::<u8>();
        TBlob::from_raw(ptr, Shape::from_slice(&[self.len]), self.dtype)
    }
}

impl FusedOptimizer {
    /// The states of `weight`, as [`crate::kvstore::StoreUpdater::create_state`] makes
    /// them, in host memory.
    pub fn create_state_now(&self, weight: &TBlob) -> Result<Vec<HostArray>> {
        let layout = self.state_layout(weight.dtype);
        let n = weight.size();
        let mut states: Vec<HostArray> = (0..layout.inner)
            .map(|_| HostArray::zeros(n, layout.dtype))
            .collect();
        if let Some(at) = layout.master_at {
            let mut master = HostArray::zeros(n, DType::F32);
            cast_now(weight, &master.blob())?;
            states.insert(at, master);
        }
        Ok(states)
    }

    /// Updates host `weight` with host `grad` and `state` now, counting the update and
    /// computing its rates as [`crate::kvstore::StoreUpdater::update`] does on device 0.
    pub fn update_now(
        &self,
        key: &ParamKey,
        weight: &TBlob,
        grad: &TBlob,
        state: &[TBlob],
    ) -> Result<()> {
        if grad.dtype != weight.dtype || grad.size() != weight.size() {
            return Err(Error::Value(format!(
                "FusedOptimizer.update: the gradient of key {key} is {} {}, its weight {} {}",
                grad.size(),
                grad.dtype,
                weight.size(),
                weight.dtype
            )));
        }
        if let Some(s) = state.iter().find(|s| s.size() != weight.size()) {
            return Err(Error::Value(format!(
                "FusedOptimizer.update: a state of key {key} has {} elements, its weight {}",
                s.size(),
                weight.size()
            )));
        }
        let step = self.step(key, 0, weight.dtype, &weight.shape, state.len())?;
        if step.through_master {
            let master = &state[0];
            let mut grad32 = HostArray::zeros(grad.size(), DType::F32);
            cast_now(grad, &grad32.blob())?;
            let mut ins = vec![master.clone(), grad32.blob()];
            ins.extend_from_slice(&state[1..]);
            run(&step.op, &ins, master)?;
            return cast_now(master, weight);
        }
        let mut ins = vec![weight.clone(), grad.clone()];
        ins.extend_from_slice(state);
        run(&step.op, &ins, weight)
    }
}

/// Runs `op`'s CPU kernel on `inputs`, writing `out`.
fn run(op: &OpRef, inputs: &[TBlob], out: &TBlob) -> Result<()> {
    let mut ctx = OpContext::new(Context::cpu(0), false);
    let outs = std::slice::from_ref(out);
    run_kernel(
        op.as_ref(),
        &mut ctx,
        Blobs::new(inputs, outs, &[OpReq::Write]),
    )
}

/// `to = from` in `to`'s dtype.
fn cast_now(from: &TBlob, to: &TBlob) -> Result<()> {
    let attrs: Attrs = [("dtype".to_string(), to.dtype.name().to_string())]
        .into_iter()
        .collect();
    let op = op::find("Cast")?.build(&attrs)?;
    run(&op, std::slice::from_ref(from), to)
}

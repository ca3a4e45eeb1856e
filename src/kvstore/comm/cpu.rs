//! `CommCpu`: sums on the host with the registered `add_n` operator and broadcasts
//! through the copy path, both as prioritised CPU work.

use super::Comm;
use crate::context::Context;
use crate::engine::{self, FnProperty, PushSpec, Var};
use crate::error::Result;
use crate::kernels::{call_kernel, kernel_for};
use crate::ndarray::copy::copy_prioritized;
use crate::ndarray::{NDArray, TBlob};
use crate::op::{self, Attrs, OpContext, OpRef, OpReq};
use smallvec::SmallVec;

/// Keeps every key on `cpu(0)` and sums there (`local`, `local_allreduce_cpu`,
/// `local_update_cpu`), copying values from other devices next to it first.
#[derive(Debug, Default, Clone, Copy)]
pub struct CommCpu;

impl Comm for CommCpu {
    fn home(&self, _init: &NDArray) -> Context {
        Context::cpu(0)
    }

    fn place(&self, stored: &NDArray, _values: &[NDArray]) -> Result<NDArray> {
        Ok(stored.clone())
    }

    fn reduce(&self, values: &[NDArray], target: &NDArray, priority: i32) -> Result<()> {
        if let [only] = values {
            if only.same_chunk(target) && only.offset() == target.offset() {
                return Ok(());
            }
        }
        let ctx = target.context();
        // Values on other devices are first copied next to the target.
        let values = values
            .iter()
            .map(|v| {
                if v.context() == ctx {
                    return Ok(v.clone());
                }
                let near = NDArray::empty(v.shape(), v.dtype(), ctx)?;
                copy_prioritized(v, &near, priority)?;
                Ok(near)
            })
            .collect::<Result<Vec<_>>>()?;
        let sum = add_n(values.len())?;
        let kernel = kernel_for(sum.as_ref(), ctx)?;
        let ins: SmallVec<[TBlob; 8]> = values.iter().map(|v| v.blob()).collect();
        let out = [target.blob()];
        let req = if values.iter().any(|v| v.overlaps(target)) {
            [OpReq::WriteInplace]
        } else {
            [OpReq::Write]
        };
        let reads: SmallVec<[Var; 8]> = values.iter().map(|v| v.var().clone()).collect();
        let prop = if ctx.is_cpu() {
            FnProperty::CpuPrioritized
        } else {
            FnProperty::Normal
        };
        engine::get().push_sync(
            Box::new(move |rctx| {
                let mut octx = OpContext::new(ctx, false);
                octx.stream = rctx.stream;
                call_kernel(kernel, sum.as_ref(), &mut octx, &ins, &out, &req)
            }),
            PushSpec::new(
                "KVStoreReduce",
                target.context(),
                &reads,
                std::slice::from_ref(target.var()),
            )
            .prop(prop)
            .priority(priority),
        );
        Ok(())
    }

    fn broadcast(&self, src: &NDArray, outs: &[NDArray], priority: i32) -> Result<()> {
        for out in outs {
            if out.same_chunk(src) && out.offset() == src.offset() {
                continue;
            }
            copy_prioritized(src, out, priority)?;
        }
        Ok(())
    }
}

/// The `add_n` operator over `n` arrays.
fn add_n(n: usize) -> Result<OpRef> {
    let attrs = Attrs::from([("num_args".to_string(), n.to_string())]);
    op::find("add_n")?.build(&attrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvstore::testutil::{full, iota, values};

    #[test]
    fn reduce_sums_values_from_several_devices() {
        let target = full(&[5], -1.0, Context::cpu(0));
        let vals: Vec<NDArray> = (0..3)
            .map(|i| full(&[5], i as f32 + 1.0, Context::cpu(i)))
            .collect();
        CommCpu.reduce(&vals, &target, 0).unwrap();
        assert_eq!(values(&target), vec![6.0; 5]);
        // The sum is pushed after the values' writers and before the target's readers.
        CommCpu
            .reduce(&[target.clone(), target.clone()], &vals[0], 3)
            .unwrap();
        assert_eq!(values(&vals[0]), vec![12.0; 5]);
    }

    #[test]
    fn reduce_of_an_array_into_itself_changes_nothing() {
        let a = full(&[4], 2.5, Context::cpu(0));
        CommCpu.reduce(std::slice::from_ref(&a), &a, 0).unwrap();
        assert_eq!(values(&a), vec![2.5; 4]);
        let b = full(&[4], 0.0, Context::cpu(0));
        CommCpu.reduce(std::slice::from_ref(&a), &b, 0).unwrap();
        assert_eq!(values(&b), vec![2.5; 4]);
    }

    #[test]
    fn broadcast_copies_small_and_large_arrays() {
        for n in [7, (1 << 18) + (1 << 16) * 3 / 4 + 1] {
            let src = iota(n, Context::cpu(0));
            let outs: Vec<NDArray> = (0..3).map(|i| full(&[n], 0.0, Context::cpu(i))).collect();
            let mut with_src = outs.clone();
            with_src.push(src.clone());
            CommCpu.broadcast(&src, &with_src, 1).unwrap();
            let want = values(&src);
            for o in &outs {
                assert_eq!(values(o), want);
            }
        }
    }

    #[test]
    fn keys_live_on_the_first_cpu() {
        let v = full(&[2], 1.0, Context::cpu(3));
        assert_eq!(CommCpu.home(&v), Context::cpu(0));
        let placed = CommCpu
            .place(&v, &[full(&[2], 1.0, Context::cpu(1))])
            .unwrap();
        assert!(placed.same_chunk(&v));
    }
}

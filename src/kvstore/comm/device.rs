//! `CommDevice`: each key is summed on one of the devices pushing to it, keys spread so
//! that every device sums about as many bytes.

use super::{Comm, CommCpu};
use crate::context::Context;
use crate::error::Result;
use crate::ndarray::{copy_into, NDArray};
use parking_lot::Mutex;
use std::collections::HashMap;

/// Keeps a key where it was initialised until its first push, then on the least loaded
/// of the devices pushing to it (`device`, `local_allreduce_device`), and sums there with
/// that device's kernels.
#[derive(Default)]
pub struct CommDevice {
    /// Reduces on the target's device and copies, as the CPU store does.
    host: CommCpu,
    /// Bytes each device sums.
    load: Mutex<HashMap<Context, usize>>,
}

impl Comm for CommDevice {
    fn home(&self, init: &NDArray) -> Context {
        init.context()
    }

    fn place(&self, stored: &NDArray, values: &[NDArray]) -> Result<NDArray> {
        let bytes = stored.size() * stored.dtype().size();
        let mut ctxs: Vec<Context> = values.iter().map(|v| v.context()).collect();
        ctxs.sort_by_key(|c| (c.dev_type as i32, c.dev_id));
        ctxs.dedup();
        let ctx = {
            let mut load = self.load.lock();
            let ctx = ctxs
                .into_iter()
                .min_by_key(|c| load.get(c).copied().unwrap_or(0))
                .unwrap_or(stored.context());
            *load.entry(ctx).or_insert(0) += bytes;
            ctx
        };
        if ctx == stored.context() {
            return Ok(stored.clone());
        }
        let moved = NDArray::empty(stored.shape(), stored.dtype(), ctx)?;
        copy_into(stored, &moved)?;
        Ok(moved)
    }

    fn reduce(&self, values: &[NDArray], target: &NDArray, priority: i32) -> Result<()> {
        self.host.reduce(values, target, priority)
    }

    fn broadcast(&self, src: &NDArray, outs: &[NDArray], priority: i32) -> Result<()> {
        self.host.broadcast(src, outs, priority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvstore::testutil::{full, values};

    #[test]
    fn keys_stay_where_they_were_initialised() {
        let v = full(&[2], 1.0, Context::cpu(2));
        assert_eq!(CommDevice::default().home(&v), Context::cpu(2));
    }

    #[test]
    fn keys_go_to_the_least_loaded_pushing_device() {
        let comm = CommDevice::default();
        let pushers = |n: usize| -> Vec<NDArray> {
            (1..3).map(|d| full(&[n], 0.0, Context::cpu(d))).collect()
        };
        let big = full(&[100], 4.0, Context::cpu(0));
        let placed = comm.place(&big, &pushers(100)).unwrap();
        assert_eq!(placed.context(), Context::cpu(1));
        assert_eq!(
            values(&placed),
            vec![4.0; 100],
            "the value moves with the key"
        );
        // Two small keys both fit on cpu(2) before it carries as much as cpu(1).
        for _ in 0..2 {
            let small = full(&[10], 0.0, Context::cpu(0));
            assert_eq!(
                comm.place(&small, &pushers(10)).unwrap().context(),
                Context::cpu(2)
            );
        }
        // A key pushed only from where it lives stays the same array.
        let here = full(&[10], 0.0, Context::cpu(1));
        assert!(comm
            .place(&here, &[full(&[10], 0.0, Context::cpu(1))])
            .unwrap()
            .same_chunk(&here));
    }

    #[test]
    fn sums_and_copies_on_the_devices_of_the_values() {
        let comm = CommDevice::default();
        let target = full(&[3], 0.0, Context::cpu(1));
        let vals = [
            full(&[3], 1.0, Context::cpu(1)),
            full(&[3], 2.0, Context::cpu(2)),
        ];
        comm.reduce(&vals, &target, 0).unwrap();
        let outs = [
            full(&[3], 0.0, Context::cpu(0)),
            full(&[3], 0.0, Context::cpu(2)),
        ];
        comm.broadcast(&target, &outs, 0).unwrap();
        for o in &outs {
            assert_eq!(values(o), vec![3.0; 3]);
        }
    }
}

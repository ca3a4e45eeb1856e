//! The data movement of the store: summing pushed values and broadcasting stored ones,
//! each pushed to the engine as prioritised CPU work.

use crate::engine::{self, FnProperty, Var};
use crate::error::{Error, Result};
use crate::kernels::cpu::add_n::sum_into;
use crate::ndarray::{NDArray, TBlob};
use crate::op::OpReq;
use rayon::prelude::*;
use smallvec::SmallVec;

/// Bytes below which a copy runs on one thread.
const PAR_COPY_MIN: usize = 1 << 20;
/// Bytes per parallel copy task.
const COPY_CHUNK: usize = 256 << 10;

/// Pushes `target = sum(values)` with `priority`. Values on devices the host cannot read
/// must have been copied to the host first; every value has the target's shape and type.
pub fn reduce_into(values: &[NDArray], target: &NDArray, priority: i32) -> Result<()> {
    if values.iter().any(|v| !v.context().is_cpu()) || !target.context().is_cpu() {
        return Err(Error::NotImplemented(
            "KVStore: reduction of arrays outside host memory is not available in this build"
                .to_string(),
        ));
    }
    if let [only] = values {
        if only.same_chunk(target) && only.offset() == target.offset() {
            return Ok(());
        }
    }
    let ins: SmallVec<[TBlob; 8]> = values.iter().map(|v| v.blob()).collect();
    let out = target.blob();
    let reads: SmallVec<[Var; 8]> = values.iter().map(|v| v.var().clone()).collect();
    engine::get().push_sync(
        Box::new(move |_| sum_into("KVStoreReduce", &ins, &out, OpReq::Write)),
        target.context(),
        &reads,
        std::slice::from_ref(target.var()),
        FnProperty::CpuPrioritized,
        priority,
        "KVStoreReduce",
    );
    Ok(())
}

/// Pushes a copy of `src` into each of `outs` with `priority`.
pub fn broadcast(src: &NDArray, outs: &[NDArray], priority: i32) -> Result<()> {
    for out in outs {
        if out.same_chunk(src) && out.offset() == src.offset() {
            continue;
        }
        if !out.context().is_cpu() || !src.context().is_cpu() {
            return Err(Error::NotImplemented(
                "KVStore: pulls into arrays outside host memory are not available in this build"
                    .to_string(),
            ));
        }
        let (s, d) = (src.blob(), out.blob());
        engine::get().push_sync(
            Box::new(move |_| {
                copy_bytes(s.bytes(), d.bytes_mut());
                Ok(())
            }),
            out.context(),
            std::slice::from_ref(src.var()),
            std::slice::from_ref(out.var()),
            FnProperty::CpuPrioritized,
            priority,
            "KVStoreBroadcast",
        );
    }
    Ok(())
}

/// Copies `src` into `dst`, over several threads for large arrays.
fn copy_bytes(src: &[u8], dst: &mut [u8]) {
    if src.len() < PAR_COPY_MIN {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(COPY_CHUNK)
            .zip(src.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

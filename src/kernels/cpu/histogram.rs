//! CPU kernel of `_histogram`: the bin edges, then each element's bin counted.

use crate::dispatch_num;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::histogram::Histogram;
use crate::op::{OpContext, OpReq, Operator};

impl CpuKernel for Histogram {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        if io.req.contains(&OpReq::Add) {
            return Err(Error::NotImplemented(format!(
                "{name}: adding into the outputs is not supported"
            )));
        }
        let (data, counts, edges_out) = (&io.inputs[0], &io.outputs[0], &io.outputs[1]);
        let bins = counts.size();
        dispatch_num!(name, data.dtype, T => {
            let edges_t = edges_out.slice_mut::<T>();
            let span = match self.uniform {
                Some((_, lo, hi)) => {
                    let (lo, hi) = Histogram::span(lo, hi);
                    for (i, e) in edges_t.iter_mut().enumerate() {
                        let i = i as f64;
                        *e = T::from_f64((hi * i + (bins as f64 - i) * lo) / bins as f64);
                    }
                    Some((lo, hi))
                }
                None => {
                    edges_t.copy_from_slice(io.inputs[1].slice::<T>());
                    None
                }
            };
            let edges: Vec<f64> = edges_t.iter().map(|e| e.to_f64()).collect();
            let c = counts.slice_mut::<i64>();
            c.fill(0);
            for x in data.slice::<T>() {
                if let Some(b) = Histogram::bin_of(x.to_f64(), &edges, span) {
                    c[b] += 1;
                }
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernel of `_histogram`.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Histogram>(k);
}

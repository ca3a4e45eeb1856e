//! CPU kernels of the update operator: shape and type checks, and the element loop over
//! weight, gradient and states, split across the rayon pool for large arrays.

use super::elem::{self, Real, H};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::map::{pool_shares_work, PAR_MIN};
use crate::kernels::cpu::simd::vectorized;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::optim::op::UpdateOp;
use crate::op::optim::spec::Kind;
use crate::op::optim::MultiUpdateOp;
use crate::op::{OpContext, OpReq, Operator};
use half::f16;
use rayon::prelude::*;

/// A raw element pointer into one blob of the running op. Arrays may alias only whole
/// (the weight given as the output): each element is read before it is written and every
/// index belongs to one thread, so reads and writes through aliases stay ordered.
#[derive(Clone, Copy)]
struct Ptr<T>(*mut T);

// SAFETY: the pointer is used only inside the op's kernel, which the engine runs with
// access to every blob; threads touch disjoint index ranges.
unsafe impl<T> Send for Ptr<T> {}

// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

impl<T: Copy> Ptr<T> {
    fn of(b: &TBlob) -> Ptr<T> {
        Ptr(b.ptr() as *mut T)
    }

    #[inline(always)]
    fn get(self, i: usize) -> T {
        // SAFETY: `i` is below the element count, which every blob of the op has (checked
        // by `check_blobs` before the loop).
        unsafe { self.0.add(i).read() }
    }

    #[inline(always)]
    fn set(self, i: usize, v: T) {
        // SAFETY: as for `get`; the engine gives the op write access to the blob.
        unsafe { self.0.add(i).write(v) }
    }
}

/// The output and how it is written.
#[derive(Clone, Copy)]
struct Out<T> {
    p: Ptr<T>,
    req: OpReq,
}

impl<T: Real> Out<T> {
    #[inline(always)]
    fn put(self, i: usize, v: T) {
        match self.req {
            OpReq::Null => {}
            OpReq::Add => self.p.set(i, self.p.get(i) + v),
            _ => self.p.set(i, v),
        }
    }
}

/// Runs `f` on every index below `n`, in parallel chunks for large `n`.
fn for_each_index(n: usize, f: impl Fn(usize) + Sync + Send) {
    if n < PAR_MIN || !pool_shares_work() {
        (0..n).for_each(f);
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    let chunk = n.div_ceil(threads * 4).max(PAR_MIN / 4);
    (0..n.div_ceil(chunk)).into_par_iter().for_each(|c| {
        (c * chunk..((c + 1) * chunk).min(n)).for_each(&f);
    });
}

/// Checks sizes and that blobs either are the same memory or do not overlap.
fn check_blobs(op: &str, blobs: &[&TBlob], n: usize) -> Result<()> {
    for (i, a) in blobs.iter().enumerate() {
        if a.size() != n {
            return Err(Error::Value(format!(
                "{op}: array {i} has {} elements, expected {n}",
                a.size()
            )));
        }
        let span = |b: &TBlob| {
            let start = b.ptr() as usize;
            (start, start + b.size() * b.dtype.size())
        };
        let (a0, a1) = span(a);
        for b in &blobs[..i] {
            let (b0, b1) = span(b);
            let same = a0 == b0 && a1 == b1;
            if !same && a0 < b1 && b0 < a1 {
                return Err(Error::Value(format!(
                    "{op}: arrays overlap in memory without being the same array"
                )));
            }
        }
    }
    Ok(())
}

/// Runs `body` on matching chunks of a weight and the arrays read beside it, in parallel
/// for large arrays, each chunk compiled for the CPU's widest vectors.
fn for_chunks<T: Real>(
    w: &mut [T],
    g: &[T],
    m: Option<&mut [T]>,
    body: impl Fn(&mut [T], &[T], Option<&mut [T]>) + Sync + Send,
) {
    let run = |w: &mut [T], g: &[T], m: Option<&mut [T]>| {
        vectorized(
            #[inline(always)]
            || body(w, g, m),
        )
    };
    let n = w.len();
    if n < PAR_MIN || !pool_shares_work() {
        return run(w, g, m);
    }
    let threads = rayon::current_num_threads().max(1);
    let chunk = n.div_ceil(threads * 4).max(PAR_MIN / 4);
    match m {
        Some(m) => w
            .par_chunks_mut(chunk)
            .zip(g.par_chunks(chunk))
            .zip(m.par_chunks_mut(chunk))
            .for_each(|((w, g), m)| run(w, g, Some(m))),
        None => w
            .par_chunks_mut(chunk)
            .zip(g.par_chunks(chunk))
            .for_each(|(w, g)| run(w, g, None)),
    }
}

impl UpdateOp {
    /// SGD with or without momentum (and the aggregated SGD) written over the weight
    /// itself, the commonest update, as loops over slices the compiler vectorises; false
    /// (nothing done) for any other update or when the gradient or momentum is the
    /// weight's own memory.
    fn run_in_place<T: Real>(&self, ins: &[TBlob], out: &TBlob, req: OpReq) -> bool {
        let distinct = |a: &TBlob, b: &TBlob| a.ptr() != b.ptr();
        let in_place = matches!(req, OpReq::Write | OpReq::WriteInplace)
            && out.ptr() == ins[0].ptr()
            && distinct(&ins[1], out);
        let h = H::<T>::new(&self.h);
        let h = &h;
        match self.kind {
            Kind::Sgd if in_place => {
                // The gradient is another array, which does not overlap the weight
                // (`check_blobs`).
                let (w, g) = (out.slice_mut::<T>(), ins[1].slice::<T>());
                for_chunks(w, g, None, |w, g, _| {
                    for (w, &g) in w.iter_mut().zip(g) {
                        *w = elem::sgd(h, *w, g);
                    }
                });
                true
            }
            Kind::AggSgd if in_place => {
                let (w, g) = (out.slice_mut::<T>(), ins[1].slice::<T>());
                for_chunks(w, g, None, |w, g, _| {
                    for (w, &g) in w.iter_mut().zip(g) {
                        *w = *w + elem::sgd_mom(h, *w, g, T::zero());
                    }
                });
                true
            }
            Kind::SgdMom if in_place && distinct(&ins[2], out) && distinct(&ins[2], &ins[1]) => {
                // The momentum is a third array, which this op updates.
                let (w, g, m) = (
                    out.slice_mut::<T>(),
                    ins[1].slice::<T>(),
                    ins[2].slice_mut::<T>(),
                );
                for_chunks(w, g, Some(m), |w, g, m| {
                    let m = m.expect("momentum chunk");
                    for ((w, &g), m) in w.iter_mut().zip(g).zip(m.iter_mut()) {
                        *m = elem::sgd_mom(h, *w, g, *m);
                        *w = *w + *m;
                    }
                });
                true
            }
            _ => false,
        }
    }

    fn run<T: Real>(&self, ins: &[TBlob], out: Out<T>) {
        let h = H::<T>::new(&self.h);
        let h = &h;
        let p = |i: usize| Ptr::<T>::of(&ins[i]);
        let n = ins[0].size();
        let (w, g) = (p(0), p(1));
        match self.kind {
            Kind::Sgd => for_each_index(n, |i| out.put(i, elem::sgd(h, w.get(i), g.get(i)))),
            Kind::SignSgd => {
                for_each_index(n, |i| out.put(i, elem::signsgd(h, w.get(i), g.get(i))))
            }
            Kind::SgdMom => {
                let m = p(2);
                for_each_index(n, |i| {
                    let wi = w.get(i);
                    let mi = elem::sgd_mom(h, wi, g.get(i), m.get(i));
                    m.set(i, mi);
                    out.put(i, wi + mi);
                })
            }
            Kind::NagMom => {
                let m = p(2);
                for_each_index(n, |i| {
                    let (wi, gi) = (w.get(i), g.get(i));
                    let mi = h.mom * m.get(i);
                    out.put(i, elem::nag_weight(h, wi, gi, mi));
                    // Read the weight again: MXNet's kernel does, after writing the output.
                    m.set(i, mi - elem::nag_step(h, w.get(i), gi));
                })
            }
            Kind::Signum => {
                let m = p(2);
                for_each_index(n, |i| {
                    let (mi, wi) = elem::signum(h, w.get(i), g.get(i), m.get(i));
                    m.set(i, mi);
                    out.put(i, wi);
                })
            }
            Kind::RmsProp | Kind::AdaGrad => {
                let s = p(2);
                let f = if self.kind == Kind::RmsProp {
                    elem::rmsprop::<T>
                } else {
                    elem::adagrad::<T>
                };
                for_each_index(n, |i| {
                    let (si, wi) = f(h, w.get(i), g.get(i), s.get(i));
                    s.set(i, si);
                    out.put(i, wi);
                })
            }
            Kind::Adam | Kind::Ftrl | Kind::AdaDelta | Kind::AdamW => {
                let (a, b) = (p(2), p(3));
                let f = match self.kind {
                    Kind::Adam => elem::adam::<T>,
                    Kind::Ftrl => elem::ftrl::<T>,
                    Kind::AdamW => elem::adamw::<T>,
                    _ => elem::adadelta::<T>,
                };
                for_each_index(n, |i| {
                    let (ai, bi, wi) = f(h, w.get(i), g.get(i), a.get(i), b.get(i));
                    a.set(i, ai);
                    b.set(i, bi);
                    out.put(i, wi);
                })
            }
            Kind::Ftml => {
                let (sd, sv, sz) = (p(2), p(3), p(4));
                for_each_index(n, |i| {
                    let (di, vi, zi, wi) =
                        elem::ftml(h, w.get(i), g.get(i), sd.get(i), sv.get(i), sz.get(i));
                    sd.set(i, di);
                    sv.set(i, vi);
                    sz.set(i, zi);
                    out.put(i, wi);
                })
            }
            Kind::RmsPropAlex => {
                let (sn, sg, sd) = (p(2), p(3), p(4));
                for_each_index(n, |i| {
                    let (ni, gi, di, wi) =
                        elem::rmspropalex(h, w.get(i), g.get(i), sn.get(i), sg.get(i), sd.get(i));
                    sn.set(i, ni);
                    sg.set(i, gi);
                    sd.set(i, di);
                    out.put(i, wi);
                })
            }
            Kind::AggSgd => for_each_index(n, |i| {
                let wi = w.get(i);
                out.put(i, wi + elem::sgd_mom(h, wi, g.get(i), T::zero()));
            }),
            Kind::MpSgd | Kind::MpSgdMom | Kind::MpNagMom | Kind::AggMpSgd | Kind::MpAdamW => {
                self.run_mp(ins, out)
            }
        }
    }

    /// The multi-precision updates: the float32 master copy is updated in float32 and the
    /// result is rounded into the weight's type.
    fn run_mp<T: Real>(&self, ins: &[TBlob], out: Out<T>) {
        let h = H::<f32>::new(&self.h);
        let h = &h;
        let n = ins[0].size();
        let g = Ptr::<T>::of(&ins[1]);
        match self.kind {
            Kind::MpSgd => {
                let w32 = Ptr::<f32>::of(&ins[2]);
                for_each_index(n, |i| {
                    let wi = elem::sgd(h, w32.get(i), g.get(i).as_f32());
                    w32.set(i, wi);
                    out.put(i, T::from_f32(wi));
                })
            }
            Kind::AggMpSgd => {
                let w32 = Ptr::<f32>::of(&ins[2]);
                for_each_index(n, |i| {
                    let wi = w32.get(i);
                    let wi = wi + elem::sgd_mom(h, wi, g.get(i).as_f32(), 0.0);
                    w32.set(i, wi);
                    out.put(i, T::from_f32(wi));
                })
            }
            Kind::MpSgdMom => {
                let (m, w32) = (Ptr::<f32>::of(&ins[2]), Ptr::<f32>::of(&ins[3]));
                for_each_index(n, |i| {
                    let wi = w32.get(i);
                    let mi = elem::sgd_mom(h, wi, g.get(i).as_f32(), m.get(i));
                    m.set(i, mi);
                    let wi = wi + mi;
                    w32.set(i, wi);
                    out.put(i, T::from_f32(wi));
                })
            }
            Kind::MpAdamW => {
                let (mean, var, w32) = (
                    Ptr::<f32>::of(&ins[2]),
                    Ptr::<f32>::of(&ins[3]),
                    Ptr::<f32>::of(&ins[4]),
                );
                for_each_index(n, |i| {
                    let (mi, vi, wi) =
                        elem::adamw(h, w32.get(i), g.get(i).as_f32(), mean.get(i), var.get(i));
                    mean.set(i, mi);
                    var.set(i, vi);
                    w32.set(i, wi);
                    out.put(i, T::from_f32(wi));
                })
            }
            _ => {
                let (m, w32) = (Ptr::<f32>::of(&ins[2]), Ptr::<f32>::of(&ins[3]));
                for_each_index(n, |i| {
                    let gi = g.get(i).as_f32();
                    let mi = h.mom * m.get(i);
                    let wi = elem::nag_weight(h, w32.get(i), gi, mi);
                    // MXNet's kernel computes the momentum from the updated master weight.
                    m.set(i, mi - elem::nag_step(h, wi, gi));
                    w32.set(i, wi);
                    out.put(i, T::from_f32(wi));
                })
            }
        }
    }
}

/// The value of a `rescale_grad` input (a one-element float32 array).
fn scale_value(op: &str, b: &TBlob) -> Result<f32> {
    if b.dtype != DType::F32 || b.size() != 1 {
        return Err(Error::Value(format!(
            "{op}: rescale_grad must be one float32 value, got {} elements of {}",
            b.size(),
            b.dtype
        )));
    }
    Ok(b.slice::<f32>()[0])
}

impl CpuKernel for UpdateOp {
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        let name = self.name();
        if self.kind.spec().scale_input {
            // MXNet skips the whole update when the scale is zero or not finite (an
            // overflowed loss scale).
            let (ins, scale) = io.inputs.split_at(io.inputs.len() - 1);
            let v = scale_value(name, &scale[0])?;
            if !v.is_finite() || v == 0.0 {
                return check_blobs(name, &ins.iter().collect::<Vec<_>>(), ins[0].size());
            }
            let mut h = self.h;
            h.rescale_grad = v as f64;
            let op = UpdateOp { kind: self.kind, h };
            return op.forward_states(ctx, Blobs::new(ins, io.outputs, io.req), io.inputs);
        }
        self.forward_states(ctx, io, io.inputs)
    }
}

impl UpdateOp {
    /// The update over weight, gradient and states (`io.inputs`, without the scale);
    /// `declared` are every input, for the type check.
    fn forward_states(&self, _: &mut OpContext, io: Blobs, declared: &[TBlob]) -> Result<()> {
        let name = self.name();
        let out = &io.outputs[0];
        let n = io.inputs[0].size();
        let all: Vec<&TBlob> = io.inputs.iter().chain(std::iter::once(out)).collect();
        check_blobs(name, &all, n)?;
        let types: Vec<DType> = declared.iter().map(|b| b.dtype).collect();
        if self.infer_type(&types)?[0] != out.dtype {
            return Err(Error::Type(format!(
                "{name}: output has dtype {} but weight has dtype {}",
                out.dtype, types[0]
            )));
        }
        let r = io.req[0];
        let done = match out.dtype {
            DType::F32 => self.run_in_place::<f32>(io.inputs, out, r),
            DType::F64 => self.run_in_place::<f64>(io.inputs, out, r),
            _ => false,
        };
        if done {
            return Ok(());
        }
        match out.dtype {
            DType::F32 => self.run::<f32>(
                io.inputs,
                Out {
                    p: Ptr::of(out),
                    req: r,
                },
            ),
            DType::F64 => self.run::<f64>(
                io.inputs,
                Out {
                    p: Ptr::of(out),
                    req: r,
                },
            ),
            DType::F16 => self.run::<f16>(
                io.inputs,
                Out {
                    p: Ptr::of(out),
                    req: r,
                },
            ),
            t => return Err(Error::Type(format!("{name}: dtype {t} is not supported"))),
        }
        Ok(())
    }
}

impl CpuKernel for MultiUpdateOp {
    /// Each weight in turn, by the single-weight update of the same formula.
    fn forward(&self, ctx: &mut OpContext, io: Blobs) -> Result<()> {
        for t in 0..self.count() {
            let (op, ins) = self.weight_update(t, io.outputs[t].dtype);
            let blobs = Blobs::new(&io.inputs[ins], &io.outputs[t..t + 1], &io.req[t..t + 1]);
            CpuKernel::forward(&op, ctx, blobs).map_err(|e| e.in_op(self.name()))?;
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<UpdateOp>(k);
    cpu::add::<MultiUpdateOp>(k);
}

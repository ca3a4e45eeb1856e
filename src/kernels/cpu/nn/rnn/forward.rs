//! The forward of the fused `RNN` on the CPU: layer after layer, the two directions of a
//! bidirectional layer side by side.

use super::cell::{self, Clip, StepFwd};
use super::{interleave, mul, mul_bt, step_time, store, RnnFloat};
use crate::error::Result;
use crate::kernels::cpu::nn::conv::workspace::Workspace;
use crate::kernels::cpu::Blobs;
use crate::op::nn::rnn::{Rnn, RnnDims, RnnMode, NAME};
use crate::op::{OpContext, OpReq};
use rand::Rng;
use rayon::prelude::*;

/// The pieces of one (layer, direction)'s reserve: gates, extra (cell states or candidate
/// hidden products; empty for the vanilla cells) and hidden states.
pub(super) fn split_cell<'a, F>(
    dims: &RnnDims,
    chunk: &'a mut [F],
) -> (&'a mut [F], &'a mut [F], &'a mut [F]) {
    let tn = dims.t * dims.n;
    let (gates, rest) = chunk.split_at_mut(tn * dims.gate_rows());
    let extra_len = if dims.has_extra() { tn * dims.h } else { 0 };
    let (extra, hs) = rest.split_at_mut(extra_len);
    (gates, extra, hs)
}

/// The clipping of an LSTM's cell states, in the compute type.
pub(super) fn clip_of<F: RnnFloat>(op: &Rnn) -> Option<Clip<F>> {
    op.clip.map(|(lo, hi)| Clip {
        lo: F::from(lo).unwrap_or_else(F::neg_infinity),
        hi: F::from(hi).unwrap_or_else(F::infinity),
        nan_to_lo: op.clip_nan,
    })
}

/// The weights and initial states one (layer, direction) runs with.
struct DirIn<'a, F> {
    layer: usize,
    dir: usize,
    input: &'a [F],
    w: &'a [F],
    hx: &'a [F],
    cx: &'a [F],
}

/// Runs one direction of one layer over the whole sequence, filling its reserve chunk.
fn run_dir<F: RnnFloat>(op: &Rnn, dims: &RnnDims, a: DirIn<F>, chunk: &mut [F]) {
    let (h, gh, tn) = (dims.h, dims.gate_rows(), dims.t * dims.n);
    let (gates, extra, hs) = split_cell(dims, chunk);
    let i_l = dims.layer_input(a.layer);
    let (wx_at, wh_at) = dims.weights(a.layer, a.dir);
    let (bx_at, bh_at) = dims.biases(a.layer, a.dir);
    let (wx, wh) = (&a.w[wx_at..wx_at + gh * i_l], &a.w[wh_at..wh_at + gh * h]);
    let (bx, bh) = (&a.w[bx_at..bx_at + gh], &a.w[bh_at..bh_at + gh]);
    // Both biases go in before the input product, except GRU's hidden candidate bias,
    // which the reset gate scales.
    let mut bias: Vec<F> = bx.iter().zip(bh).map(|(&x, &y)| x + y).collect();
    if op.mode == RnnMode::Gru {
        bias[2 * h..].copy_from_slice(&bx[2 * h..]);
    }
    for row in gates.chunks_exact_mut(gh) {
        row.copy_from_slice(&bias);
    }
    mul_bt(tn, i_l, gh, a.input, i_l, wx, gates, true, true);
    // The step products read the hidden weights as an h×gh row-major matrix: in that
    // layout the GEMM streams them as they are instead of repacking them at every step.
    let wh_t = transposed(wh, gh, h);
    let blocks = row_blocks(dims, a.dir == 0 && dims.d == 1);
    let threads = blocks.len() == 1;
    let mut parts = split_rows(dims, &blocks, gates, extra, hs);
    let run_block = |(rows, b): (std::ops::Range<usize>, &mut Block<F>)| {
        let m = rows.len();
        let mut q = vec![F::zero(); m * gh];
        let hx = &a.hx[rows.start * h..rows.end * h];
        let cx = if a.cx.is_empty() {
            &[][..]
        } else {
            &a.cx[rows.start * h..rows.end * h]
        };
        for s in 0..dims.t {
            let t = step_time(dims, a.dir, s);
            let tp = (s > 0).then(|| step_time(dims, a.dir, s - 1));
            let (h_prev, h_t) = match tp {
                Some(tp) => pick(&mut b.hs, tp, t),
                None => (hx, &mut *b.hs[t]),
            };
            let (c_prev, extra_t): (&[F], &mut [F]) = match (op.mode, tp) {
                (RnnMode::Lstm, Some(tp)) => pick(&mut b.extra, tp, t),
                (RnnMode::Lstm, None) => (cx, &mut *b.extra[t]),
                (RnnMode::Gru, _) => (&[], &mut *b.extra[t]),
                _ => (&[], &mut []),
            };
            mul(m, h, gh, h_prev, &wh_t, &mut q, false, threads);
            cell::forward(
                op.mode,
                m,
                h,
                StepFwd {
                    gates: &mut *b.gates[t],
                    hidden: &q,
                    bias_h: bh,
                    h_prev,
                    c_prev,
                    extra: extra_t,
                    h: h_t,
                },
                clip_of::<F>(op),
            );
        }
    };
    if threads {
        blocks.into_iter().zip(parts.iter_mut()).for_each(run_block);
    } else {
        blocks
            .into_par_iter()
            .zip(parts.par_iter_mut())
            .for_each(run_block);
    }
}

/// `v` (rows × cols, row-major) transposed.
fn transposed<F: RnnFloat>(v: &[F], rows: usize, cols: usize) -> Vec<F> {
    let mut out = vec![F::zero(); rows * cols];
    if cols == 0 {
        return out;
    }
    for (r, row) in v.chunks_exact(cols).enumerate() {
        for (c, &x) in row.iter().enumerate() {
            out[c * rows + r] = x;
        }
    }
    out
}

/// The batch rows each thread steps through the sequence on its own: the recurrence of a
/// row reads only that row, so blocks never wait for each other between steps. One block
/// (whose products may use every thread) when `split` is false or the batch is small.
pub(super) fn row_blocks(dims: &RnnDims, split: bool) -> Vec<std::ops::Range<usize>> {
    let threads = rayon::current_num_threads();
    let work = dims.t * dims.n * dims.gate_rows() * dims.h;
    let nb = if split && threads > 1 && work >= 1 << 22 {
        threads.min(dims.n / 8).max(1)
    } else {
        1
    };
    (0..nb)
        .map(|b| b * dims.n / nb..(b + 1) * dims.n / nb)
        .collect()
}

/// One block's per-step pieces of the reserve: for each time step, its rows of the gates,
/// of the extra values and of the hidden states.
pub(super) struct Block<'a, F> {
    pub gates: Vec<&'a mut [F]>,
    pub extra: Vec<&'a mut [F]>,
    pub hs: Vec<&'a mut [F]>,
}

/// Cuts every step's rows of `gates`, `extra` and `hs` into the blocks' rows.
fn split_rows<'a, F>(
    dims: &RnnDims,
    blocks: &[std::ops::Range<usize>],
    gates: &'a mut [F],
    extra: &'a mut [F],
    hs: &'a mut [F],
) -> Vec<Block<'a, F>> {
    let ew = if dims.has_extra() { dims.h } else { 0 };
    let g = cut_steps(dims, blocks, gates, dims.gate_rows());
    let e = cut_steps(dims, blocks, extra, ew);
    let h = cut_steps(dims, blocks, hs, dims.h);
    g.into_iter()
        .zip(e)
        .zip(h)
        .map(|((gates, extra), hs)| Block { gates, extra, hs })
        .collect()
}

/// For each block, its rows of every step of `v` (`t` steps of `n` rows of `width`).
pub(super) fn cut_steps<'a, F>(
    dims: &RnnDims,
    blocks: &[std::ops::Range<usize>],
    v: &'a mut [F],
    width: usize,
) -> Vec<Vec<&'a mut [F]>> {
    let mut out: Vec<Vec<&'a mut [F]>> = blocks.iter().map(|_| Vec::new()).collect();
    let step = dims.n * width;
    if step == 0 {
        for b in out.iter_mut() {
            b.extend((0..dims.t).map(|_| &mut [][..]));
        }
        return out;
    }
    for mut rest in v.chunks_mut(step) {
        for (b, rows) in out.iter_mut().zip(blocks) {
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(rows.len() * width);
            b.push(mine);
            rest = tail;
        }
    }
    out
}

/// Step `read` (shared) and step `write` (mutable) of per-step slices.
pub(super) fn pick<'a, F>(
    v: &'a mut [&mut [F]],
    read: usize,
    write: usize,
) -> (&'a [F], &'a mut [F]) {
    debug_assert_ne!(read, write);
    if read < write {
        let (lo, hi) = v.split_at_mut(write);
        (&*lo[read], &mut *hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(read);
        (&*hi[0], &mut *lo[write])
    }
}

/// Fills the dropout masks of the reserve: drawn while training, ones otherwise.
fn fill_masks<F: RnnFloat>(op: &Rnn, ctx: &mut OpContext, masks: &mut [F]) -> Result<()> {
    if !ctx.is_train {
        masks.fill(F::one());
        return Ok(());
    }
    let keep = 1.0 - op.p;
    let scale = F::from(1.0 / keep).unwrap_or_else(F::one);
    let rng = ctx.rng(NAME)?;
    for m in masks.iter_mut() {
        *m = if rng.gen::<f64>() < keep {
            scale
        } else {
            F::zero()
        };
    }
    Ok(())
}

/// The forward kernel: outputs, final states and the reserve.
pub(super) fn run<F: RnnFloat>(
    op: &Rnn,
    dims: &RnnDims,
    ctx: &mut OpContext,
    io: Blobs,
) -> Result<()> {
    let v = op.n_visible();
    let (x, w, hx) = (
        io.inputs[0].slice::<F>(),
        io.inputs[1].slice::<F>(),
        io.inputs[2].slice::<F>(),
    );
    let cx: &[F] = if op.mode == RnnMode::Lstm {
        io.inputs[3].slice::<F>()
    } else {
        &[]
    };
    let mut scratch;
    let reserve: &mut [F] = if io.req[v] == OpReq::Null {
        scratch = Workspace::<F>::new(ctx, NAME, dims.reserve_len())?;
        scratch.slice_mut()
    } else {
        io.outputs[v].slice_mut::<F>()
    };
    let cells_len = dims.cell_reserve() * dims.l * dims.d;
    let (cells, masks) = reserve.split_at_mut(cells_len);
    if dims.dropout {
        fill_masks(op, ctx, masks)?;
    }
    let mut layer_in =
        Workspace::<F>::new(ctx, NAME, if dims.l > 1 { dims.layer_output() } else { 0 })?;
    let layer_in = layer_in.slice_mut();
    let mut chunks: Vec<&mut [F]> = if dims.cell_reserve() == 0 {
        (0..dims.l * dims.d).map(|_| &mut [][..]).collect()
    } else {
        cells.chunks_mut(dims.cell_reserve()).collect()
    };
    let (nh, lo) = (dims.n * dims.h, dims.layer_output());
    for l in 0..dims.l {
        let (done, cur) = chunks.split_at_mut(l * dims.d);
        if l > 0 {
            let prev: Vec<&[F]> = done[(l - 1) * dims.d..]
                .iter()
                .map(|c| split_cell_ref(dims, c))
                .collect();
            let mask = dims
                .dropout
                .then(|| &masks[dims.mask_at(l - 1) - cells_len..][..lo]);
            interleave(dims, &prev, mask, layer_in);
        }
        let input: &[F] = if l == 0 { x } else { layer_in };
        let state = |dir: usize| (l * dims.d + dir) * nh;
        let dir_in = |dir: usize| DirIn {
            layer: l,
            dir,
            input,
            w,
            hx: &hx[state(dir)..state(dir) + nh],
            cx: if cx.is_empty() {
                &[]
            } else {
                &cx[state(dir)..state(dir) + nh]
            },
        };
        if dims.d == 2 {
            let (c0, c1) = cur[..2].split_at_mut(1);
            rayon::join(
                || run_dir(op, dims, dir_in(0), c0[0]),
                || run_dir(op, dims, dir_in(1), c1[0]),
            );
        } else {
            run_dir(op, dims, dir_in(0), cur[0]);
        }
    }
    write_outputs(op, dims, io, &chunks, hx, cx)
}

/// The hidden states of a (layer, direction)'s reserve chunk.
pub(super) fn split_cell_ref<'a, F>(dims: &RnnDims, chunk: &'a [F]) -> &'a [F] {
    let tn = dims.t * dims.n;
    let skip = tn * dims.gate_rows() + if dims.has_extra() { tn * dims.h } else { 0 };
    &chunk[skip..]
}

/// Writes the output sequence and the final states from the reserve.
fn write_outputs<F: RnnFloat>(
    op: &Rnn,
    dims: &RnnDims,
    io: Blobs,
    chunks: &[&mut [F]],
    hx: &[F],
    cx: &[F],
) -> Result<()> {
    let (nh, tn) = (dims.n * dims.h, dims.t * dims.n);
    let last = (dims.l - 1) * dims.d;
    if io.req[0] != OpReq::Null {
        let hs: Vec<&[F]> = chunks[last..]
            .iter()
            .map(|c| split_cell_ref(dims, c))
            .collect();
        if io.req[0] == OpReq::Add {
            let mut tmp = vec![F::zero(); dims.layer_output()];
            interleave(dims, &hs, None, &mut tmp);
            store(io.outputs[0].slice_mut::<F>(), &tmp, OpReq::Add);
        } else {
            interleave(dims, &hs, None, io.outputs[0].slice_mut::<F>());
        }
    }
    if !op.state_outputs {
        return Ok(());
    }
    let hy = io.outputs[1].slice_mut::<F>();
    let mut cy = (op.mode == RnnMode::Lstm).then(|| io.outputs[2].slice_mut::<F>());
    for (k, chunk) in chunks.iter().enumerate() {
        let dir = k % dims.d;
        let at = k * nh..(k + 1) * nh;
        let t_last = (dims.t > 0).then(|| step_time(dims, dir, dims.t - 1));
        let h_final = match t_last {
            Some(t) => &split_cell_ref(dims, chunk)[t * nh..(t + 1) * nh],
            None => &hx[at.clone()],
        };
        store(&mut hy[at.clone()], h_final, io.req[1]);
        if let Some(cy) = cy.as_deref_mut() {
            let c_final = match t_last {
                Some(t) => {
                    let extra = &chunk[tn * dims.gate_rows()..][..tn * dims.h];
                    &extra[t * nh..(t + 1) * nh]
                }
                None => &cx[at.clone()],
            };
            store(&mut cy[at], c_final, io.req[2]);
        }
    }
    Ok(())
}

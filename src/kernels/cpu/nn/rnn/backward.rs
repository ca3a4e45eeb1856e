//! The backward of the fused `RNN` on the CPU: layers from the last, each direction's
//! steps in reverse, then the weight and input gradients of the whole sequence as a few
//! large products.

use super::cell::{self, StepBwd};
use super::forward::{clip_of, cut_steps, row_blocks, split_cell_ref};
use super::{add_at_b, interleave, mul, step_time, store, RnnFloat};
use crate::error::Result;
use crate::kernels::cpu::nn::conv::workspace::Workspace;
use crate::kernels::cpu::Blobs;
use crate::op::nn::rnn::{Rnn, RnnDims, RnnMode, NAME};
use crate::op::{OpContext, OpReq};
use rayon::prelude::*;

/// The arrays the backward of one (layer, direction) reads.
struct DirBwd<'a, F> {
    layer: usize,
    dir: usize,
    /// The layer's input (`t·n × i_l`).
    input: &'a [F],
    w: &'a [F],
    /// The reserve chunk the forward left.
    chunk: &'a [F],
    /// The gradient of the layer's output (`t·n × d·h`).
    dout: &'a [F],
    hx: &'a [F],
    cx: &'a [F],
    /// The gradients of the final states, if the forward showed them.
    dhy: Option<&'a [F]>,
    dcy: Option<&'a [F]>,
}

/// Scratch for one direction: pre-activation gradients of the input and hidden products.
struct Scratch<'a, F> {
    dgx: &'a mut [F],
    dgh: &'a mut [F],
}

/// What one direction's backward produces besides the parameter gradients: the
/// gradients of its initial states.
struct DirGrads<F> {
    dhx: Vec<F>,
    dcx: Vec<F>,
}

/// Runs the steps of one direction in reverse; leaves the pre-activation gradients in
/// `sc` and returns the initial states' gradients. Blocks of batch rows run side by side
/// as in the forward.
fn steps<F: RnnFloat>(op: &Rnn, dims: &RnnDims, a: &DirBwd<F>, sc: &mut Scratch<F>) -> DirGrads<F> {
    let (gh, gru) = (dims.gate_rows(), op.mode == RnnMode::Gru);
    let blocks = row_blocks(dims, dims.d == 1);
    let threads = blocks.len() == 1;
    let dgx = cut_steps(dims, &blocks, &mut *sc.dgx, gh);
    let dgh = cut_steps(dims, &blocks, &mut *sc.dgh, if gru { gh } else { 0 });
    let work = blocks.into_iter().zip(dgx.into_iter().zip(dgh));
    let results: Vec<(Vec<F>, Vec<F>)> = if threads {
        work.map(|(rows, (x, q))| block_steps(op, dims, a, rows, x, q, true))
            .collect()
    } else {
        work.collect::<Vec<_>>()
            .into_par_iter()
            .map(|(rows, (x, q))| block_steps(op, dims, a, rows, x, q, false))
            .collect()
    };
    let (mut dhx, mut dcx) = (Vec::new(), Vec::new());
    for (h, c) in results {
        dhx.extend(h);
        dcx.extend(c);
    }
    DirGrads { dhx, dcx }
}

/// The reverse steps of the batch rows `rows`, writing their rows of each step's
/// pre-activation gradients (`dgx`, and GRU's `dgh`, one slice per step); returns their
/// initial states' gradients.
fn block_steps<F: RnnFloat>(
    op: &Rnn,
    dims: &RnnDims,
    a: &DirBwd<F>,
    rows: std::ops::Range<usize>,
    mut dgx: Vec<&mut [F]>,
    mut dgh: Vec<&mut [F]>,
    threads: bool,
) -> (Vec<F>, Vec<F>) {
    let (n, h, gh) = (dims.n, dims.h, dims.gate_rows());
    let (m, r0, dh_cols, tn) = (rows.len(), rows.start, dims.d * h, dims.t * n);
    let mh = m * h;
    let gates = &a.chunk[..tn * gh];
    let extra: &[F] = if dims.has_extra() {
        &a.chunk[tn * gh..tn * gh + tn * h]
    } else {
        &[]
    };
    let hs = split_cell_ref(dims, a.chunk);
    let (_, wh_at) = dims.weights(a.layer, a.dir);
    let wh = &a.w[wh_at..wh_at + gh * h];
    let clip = clip_of::<F>(op);
    let gru = op.mode == RnnMode::Gru;
    let mine = |v: &[F]| v[r0 * h..r0 * h + mh].to_vec();
    let mut dh_next = a.dhy.map_or_else(|| vec![F::zero(); mh], mine);
    let mut dc = a.dcy.map_or_else(|| vec![F::zero(); mh], mine);
    let mut dh = vec![F::zero(); mh];
    let mut direct = vec![F::zero(); if gru { mh } else { 0 }];
    // Step t's rows of a `t·n × width` array.
    let at = |t: usize, width: usize| (t * n + r0) * width..(t * n + r0 + m) * width;
    for s in (0..dims.t).rev() {
        let t = step_time(dims, a.dir, s);
        let tp = (s > 0).then(|| step_time(dims, a.dir, s - 1));
        for r in 0..m {
            let src = &a.dout[(t * n + r0 + r) * dh_cols + a.dir * h..][..h];
            for ((o, &g), &nx) in dh[r * h..(r + 1) * h]
                .iter_mut()
                .zip(src)
                .zip(&dh_next[r * h..(r + 1) * h])
            {
                *o = g + nx;
            }
        }
        let h_prev = tp.map_or(&a.hx[r0 * h..r0 * h + mh], |tp| &hs[at(tp, h)]);
        let c_prev = match (op.mode, tp) {
            (RnnMode::Lstm, Some(tp)) => &extra[at(tp, h)],
            (RnnMode::Lstm, None) => &a.cx[r0 * h..r0 * h + mh],
            _ => &[],
        };
        cell::backward(
            op.mode,
            m,
            h,
            StepBwd {
                gates: &gates[at(t, gh)],
                extra: if dims.has_extra() {
                    &extra[at(t, h)]
                } else {
                    &[]
                },
                h_prev,
                c_prev,
                dh: &dh,
                dc: &mut dc,
                dgx: &mut *dgx[t],
                dgh: if gru { &mut *dgh[t] } else { &mut [] },
                dh_direct: &mut direct,
            },
            clip,
        );
        let dq: &[F] = if gru { &*dgh[t] } else { &*dgx[t] };
        if gru {
            dh_next.copy_from_slice(&direct);
        }
        mul(m, gh, h, dq, wh, &mut dh_next, gru, threads);
    }
    (dh_next, dc)
}

/// Adds one direction's weight and bias gradients into `dw`.
fn param_grads<F: RnnFloat>(
    dims: &RnnDims,
    a: &DirBwd<F>,
    sc: &Scratch<F>,
    gru: bool,
    dw: &mut [F],
) {
    let (n, h, gh, t) = (dims.n, dims.h, dims.gate_rows(), dims.t);
    let (tn, nh) = (t * n, n * h);
    let i_l = dims.layer_input(a.layer);
    let (wx_at, wh_at) = dims.weights(a.layer, a.dir);
    let (bx_at, bh_at) = dims.biases(a.layer, a.dir);
    let dgh: &[F] = if gru { &*sc.dgh } else { &*sc.dgx };
    let hs = split_cell_ref(dims, a.chunk);
    add_at_b(
        tn,
        gh,
        i_l,
        &*sc.dgx,
        a.input,
        &mut dw[wx_at..wx_at + gh * i_l],
    );
    let dwh = &mut dw[wh_at..wh_at + gh * h];
    if t > 0 {
        // Step t's previous state is the hidden state of the step before it in time for
        // the forward direction, after it for the backward one, and `hx` for the first.
        let later = (t - 1) * n;
        if a.dir == 0 {
            add_at_b(later, gh, h, &dgh[n * gh..], &hs[..later * h], dwh);
            add_at_b(n, gh, h, &dgh[..n * gh], a.hx, dwh);
        } else {
            add_at_b(later, gh, h, &dgh[..later * gh], &hs[nh..], dwh);
            add_at_b(n, gh, h, &dgh[later * gh..], a.hx, dwh);
        }
    }
    column_sums(&*sc.dgx, gh, &mut dw[bx_at..bx_at + gh]);
    column_sums(dgh, gh, &mut dw[bh_at..bh_at + gh]);
}

/// `out[j] += Σ_r m[r, j]` over the rows of a row-major `m` with `cols` columns.
fn column_sums<F: RnnFloat>(m: &[F], cols: usize, out: &mut [F]) {
    for row in m.chunks_exact(cols) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o = *o + v;
        }
    }
}

/// The backward kernel: gradients of data, parameters and initial states.
pub(super) fn run<F: RnnFloat>(
    op: &Rnn,
    dims: &RnnDims,
    ctx: &mut OpContext,
    io: Blobs,
) -> Result<()> {
    let (v, k) = (op.n_visible(), op.n_inputs());
    let lstm = op.mode == RnnMode::Lstm;
    let gru = op.mode == RnnMode::Gru;
    let dy = io.inputs[0].slice::<F>();
    let dhy = (v >= 2).then(|| io.inputs[1].slice::<F>());
    let dcy = (v >= 3).then(|| io.inputs[2].slice::<F>());
    let (x, w, hx) = (
        io.inputs[v].slice::<F>(),
        io.inputs[v + 1].slice::<F>(),
        io.inputs[v + 2].slice::<F>(),
    );
    let cx: &[F] = if lstm {
        io.inputs[v + 3].slice::<F>()
    } else {
        &[]
    };
    let reserve = io.inputs[v + k].slice::<F>();
    let cells_len = dims.cell_reserve() * dims.l * dims.d;
    let mask_of = |l: usize| {
        dims.dropout
            .then(|| &reserve[dims.mask_at(l)..dims.mask_at(l) + dims.layer_output()])
    };
    let mut dw = (io.req[1] != OpReq::Null).then(|| io.outputs[1].slice_mut::<F>());
    if io.req[1] != OpReq::Add {
        if let Some(dw) = dw.as_deref_mut() {
            dw.fill(F::zero());
        }
    }
    let mut dhx_out = (io.req[2] != OpReq::Null).then(|| io.outputs[2].slice_mut::<F>());
    let mut dcx_out = (lstm && io.req[3] != OpReq::Null).then(|| io.outputs[3].slice_mut::<F>());

    let (tn, gh, nh, lo) = (
        dims.t * dims.n,
        dims.gate_rows(),
        dims.n * dims.h,
        dims.layer_output(),
    );
    let deep = dims.l > 1;
    let mut ws_dgx = Workspace::<F>::new(ctx, NAME, tn * gh)?;
    let mut ws_dgh = Workspace::<F>::new(ctx, NAME, if gru { tn * gh } else { 0 })?;
    let mut ws_in = Workspace::<F>::new(ctx, NAME, if deep { lo } else { 0 })?;
    let mut ws_dcur = Workspace::<F>::new(ctx, NAME, if deep { lo } else { 0 })?;
    let mut ws_dprev = Workspace::<F>::new(ctx, NAME, if deep { lo } else { 0 })?;
    let (layer_in, mut dcur, mut dprev) =
        (ws_in.slice_mut(), ws_dcur.slice_mut(), ws_dprev.slice_mut());
    let mut sc = Scratch {
        dgx: ws_dgx.slice_mut(),
        dgh: ws_dgh.slice_mut(),
    };
    let chunk = |l: usize, dir: usize| {
        let at = dims.cell_at(l, dir);
        &reserve[at..at + dims.cell_reserve()]
    };
    debug_assert!(reserve.len() >= cells_len);
    let dx_req = io.req[0];
    for l in (0..dims.l).rev() {
        if l > 0 {
            let prev: Vec<&[F]> = (0..dims.d)
                .map(|dir| split_cell_ref(dims, chunk(l - 1, dir)))
                .collect();
            interleave(dims, &prev, mask_of(l - 1), layer_in);
        }
        let input: &[F] = if l == 0 { x } else { layer_in };
        let dout: &[F] = if l == dims.l - 1 { dy } else { dcur };
        let i_l = dims.layer_input(l);
        // Where the gradient of this layer's input goes: the data's gradient for the
        // first layer (if asked for), the scratch for the layer below otherwise.
        let mut dx_dst: Option<&mut [F]> = if l > 0 {
            Some(&mut *dprev)
        } else if dx_req != OpReq::Null {
            Some(io.outputs[0].slice_mut::<F>())
        } else {
            None
        };
        for dir in 0..dims.d {
            let state = (l * dims.d + dir) * nh..(l * dims.d + dir + 1) * nh;
            let a = DirBwd {
                layer: l,
                dir,
                input,
                w,
                chunk: chunk(l, dir),
                dout,
                hx: &hx[state.clone()],
                cx: if lstm { &cx[state.clone()] } else { &[] },
                dhy: dhy.map(|d| &d[state.clone()]),
                dcy: dcy.map(|d| &d[state.clone()]),
            };
            let g = steps(op, dims, &a, &mut sc);
            if let Some(out) = dhx_out.as_deref_mut() {
                store(&mut out[state.clone()], &g.dhx, io.req[2]);
            }
            if let Some(out) = dcx_out.as_deref_mut() {
                store(&mut out[state.clone()], &g.dcx, io.req[3]);
            }
            if let Some(dw) = dw.as_deref_mut() {
                param_grads(dims, &a, &sc, gru, dw);
            }
            if let Some(dst) = dx_dst.as_deref_mut() {
                let (wx_at, _) = dims.weights(l, dir);
                let wx = &w[wx_at..wx_at + gh * i_l];
                let add = dir > 0 || (l == 0 && dx_req == OpReq::Add);
                mul(tn, gh, i_l, &*sc.dgx, wx, dst, add, true);
            }
        }
        if l > 0 {
            if let Some(m) = mask_of(l - 1) {
                dprev.iter_mut().zip(m).for_each(|(g, &k)| *g = *g * k);
            }
            std::mem::swap(&mut dcur, &mut dprev);
        }
    }
    Ok(())
}

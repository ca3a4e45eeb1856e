//! CPU kernels of `add_n` (`ElementWiseSum`): the element-wise sum of any number of
//! same-shape arrays, and its backward, which hands the output gradient to every input.

use super::map::{map1, pool_shares_work, PAR_MIN};
use super::num::Num;
use crate::dispatch_num;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::elemwise::add_n::{AddN, AddNBackward};
use crate::op::{OpContext, OpReq, Operator};
use rayon::prelude::*;

/// Elements summed per block: small enough for the block to stay in cache while every
/// input is added to it.
const BLOCK: usize = 4096;

/// `out = keep * out + sum(ins)` over one block.
fn sum_block<T: Num>(out: &mut [T], start: usize, ins: &[&[T]], keep: usize) {
    let end = start + out.len();
    let mut rest = ins;
    match keep {
        0 => match ins {
            [] => out.iter_mut().for_each(|o| *o = T::ZERO),
            [a, others @ ..] => {
                out.copy_from_slice(&a[start..end]);
                rest = others;
            }
        },
        1 => {}
        _ => {
            let k = T::from_f64(keep as f64);
            out.iter_mut().for_each(|o| *o = o.mul(k));
        }
    }
    for x in rest {
        for (o, &v) in out.iter_mut().zip(&x[start..end]) {
            *o = o.add(v);
        }
    }
}

fn sum_kernel<T: Num>(out: &mut [T], ins: &[&[T]], keep: usize) {
    let body = |(bi, o): (usize, &mut [T])| sum_block(o, bi * BLOCK, ins, keep);
    if out.len() < PAR_MIN || !pool_shares_work() {
        out.chunks_mut(BLOCK).enumerate().for_each(body);
    } else {
        out.par_chunks_mut(BLOCK).enumerate().for_each(body);
    }
}

/// `out (=|+=) sum(inputs)`; an input that is the output itself counts as its old value.
fn sum_into(op: &str, inputs: &[TBlob], out: &TBlob, req: OpReq) -> Result<()> {
    if req == OpReq::Null {
        return Ok(());
    }
    let aliased = inputs.iter().filter(|b| b.ptr() == out.ptr()).count();
    let keep = aliased + usize::from(req == OpReq::Add);
    let others: Vec<&TBlob> = inputs.iter().filter(|b| b.ptr() != out.ptr()).collect();
    dispatch_num!(op, out.dtype, T => {
        let ins: Vec<&[T]> = others.iter().map(|b| b.slice::<T>()).collect();
        sum_kernel(out.slice_mut::<T>(), &ins, keep);
    });
    Ok(())
}

impl CpuKernel for AddN {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        sum_into("add_n", io.inputs, &io.outputs[0], io.req[0])
    }
}

impl CpuKernel for AddNBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let g = &io.inputs[0];
        for (o, &r) in io.outputs.iter().zip(io.req) {
            if r == OpReq::Null || (r != OpReq::Add && o.ptr() == g.ptr()) {
                continue;
            }
            dispatch_num!(self.name(), g.dtype, T => map1(g.slice::<T>(), o.slice_mut::<T>(), r, |v| v));
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<AddN>(k);
    cpu::add::<AddNBackward>(k);
}

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::imperative::invoke;
    use crate::kernels::cpu::grad::testing::backward_of;
    use crate::kernels::cpu::testing::run_req;
    use crate::op::elemwise::add_n::add_n_op;
    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run, values};
    use crate::op::OpReq;

    #[test]
    fn sums_any_number_of_arrays() {
        let a = f32a(&[2, 2], &[1., 2., 3., 4.]);
        let b = f32a(&[2, 2], &[10., 20., 30., 40.]);
        let c = f32a(&[2, 2], &[100., 200., 300., 400.]);
        let s = &run("add_n", &[("num_args", "3")], &[a.clone(), b.clone(), c])[0];
        assert_eq!(f32s(s), vec![111., 222., 333., 444.]);
        let one = &run("ElementWiseSum", &[("num_args", "1")], &[a.clone()])[0];
        assert_eq!(f32s(one), vec![1., 2., 3., 4.]);
        let i = array::<i32>(&[3], &[1, 2, 3]);
        let si = &run("add_n", &[("num_args", "2")], &[i.clone(), i])[0];
        assert_eq!(values::<i32>(si), vec![2, 4, 6]);
        assert!(try_run(
            "add_n",
            &[("num_args", "2")],
            &[a.clone(), f32a(&[4], &[0.; 4])]
        )
        .is_err());
        assert!(try_run("add_n", &[("num_args", "3")], &[a.clone(), b.clone()]).is_err());
        assert!(try_run("add_n", &[], &[a, b]).is_err());
    }

    #[test]
    fn large_sum_is_split_and_exact() {
        let n = (1 << 18) + 5;
        let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
        let a = f32a(&[n], &x);
        let s = &run("add_n", &[("num_args", "3")], &[a.clone(), a.clone(), a])[0];
        let got = f32s(s);
        assert!(got.iter().zip(&x).all(|(g, v)| *g == 3. * v));
    }

    #[test]
    fn in_place_and_add_requests() {
        let a = f32a(&[3], &[1., 2., 3.]);
        let b = f32a(&[3], &[10., 20., 30.]);
        let op = add_n_op(2);
        // The output is input 0: a += b.
        run_req(
            &op,
            &[a.clone(), b.clone()],
            &[a.clone()],
            &[OpReq::WriteInplace],
        );
        assert_eq!(f32s(&a), vec![11., 22., 33.]);
        let out = f32a(&[3], &[1., 1., 1.]);
        run_req(&op, &[a.clone(), b], &[out.clone()], &[OpReq::Add]);
        assert_eq!(f32s(&out), vec![22., 43., 64.]);
    }

    #[test]
    fn gradient_copies_to_every_input() {
        let op = add_n_op(3);
        let x = |v: f64| array::<f64>(&[2, 3], &[v, 1., 2., 3., 4., 5.]);
        gradcheck(&op, &[x(0.), x(1.), x(2.)], &[0, 1, 2], 1e-6, 1e-6);
        let g = backward_of(&op);
        let og = f32a(&[2], &[1., 2.]);
        let acc = f32a(&[2], &[5., 5.]);
        let outs = [f32a(&[2], &[0., 0.]), acc.clone(), f32a(&[2], &[7., 7.])];
        run_req(
            &g.op,
            &[og.clone()],
            &outs,
            &[OpReq::Write, OpReq::Add, OpReq::Null],
        );
        assert_eq!(f32s(&outs[0]), vec![1., 2.]);
        assert_eq!(f32s(&acc), vec![6., 7.]);
        assert_eq!(f32s(&outs[2]), vec![7., 7.]);
        let _ = invoke(&g.op, &[og], None, None, true).unwrap();
    }

    #[test]
    fn partial_shapes_flow_both_ways() {
        let op = add_n_op(3);
        let mut ins = [None, Some(crate::shape::Shape::from_slice(&[2, 3])), None];
        let mut outs = [None];
        op.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert!(ins.iter().all(|s| s.as_deref() == Some(&[2, 3][..])));
        assert_eq!(outs[0].as_deref(), Some(&[2, 3][..]));
        let mut ins = [None, None, None];
        let mut outs = [Some(crate::shape::Shape::from_slice(&[4]))];
        op.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[2].as_deref(), Some(&[4][..]));
        let mut ins = [Some(crate::shape::Shape::from_slice(&[4])), None, None];
        let mut outs = [Some(crate::shape::Shape::from_slice(&[5]))];
        assert!(op.infer_shape_partial(&mut ins, &mut outs).is_err());
    }
}

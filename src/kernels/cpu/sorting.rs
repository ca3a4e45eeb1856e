//! CPU kernels of the sorting operators: `topk`, `sort`, `argsort` (stable: ties keep
//! index order; NaN sorts above every number).

use super::indexing::{store, CastElem, Scalar};
use super::map::{pool_shares_work, PAR_MIN};
use super::num::Num;
use crate::dispatch_num;
use crate::dtype::Element;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::sorting::{Lanes, Ret, SortOp};
use crate::op::{OpContext, OpReq};
use rayon::prelude::*;

/// An element's place in a total order as an unsigned key: numbers in their order, `-0.0`
/// equal to `0.0`, NaN above every number and equal to NaN.
trait SortKey: Element {
    fn key(self) -> u64;
}

#[inline(always)]
fn float_key(v: f64) -> u64 {
    if v.is_nan() {
        return u64::MAX;
    }
    let b = if v == 0.0 { 0 } else { v.to_bits() };
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

macro_rules! int_key {
    ($($t:ty),*) => {$(
        impl SortKey for $t {
            #[inline(always)]
            fn key(self) -> u64 {
                (self as i64 as u64) ^ (1 << 63)
            }
        }
    )*};
}

int_key!(u8, i8, i32, i64);

impl SortKey for f32 {
    #[inline(always)]
    fn key(self) -> u64 {
        float_key(self as f64)
    }
}

impl SortKey for f64 {
    #[inline(always)]
    fn key(self) -> u64 {
        float_key(self)
    }
}

impl SortKey for half::f16 {
    #[inline(always)]
    fn key(self) -> u64 {
        float_key(self.to_f64())
    }
}

/// Orders `scratch` (key, index) pairs and keeps the first `k` indices in `dst`; keys are
/// complemented for a descending order, so ties always keep index order.
fn order_lane(scratch: &mut [(u64, usize)], k: usize, dst: &mut [usize], parallel: bool) {
    let n = scratch.len();
    if k == 0 {
        return;
    }
    if parallel {
        scratch.par_sort_unstable();
    } else {
        if k < n {
            scratch.select_nth_unstable(k - 1);
        }
        scratch[..k].sort_unstable();
    }
    for (d, s) in dst.iter_mut().zip(scratch.iter()) {
        *d = s.1;
    }
}

/// For every lane, the positions of its first `k` elements in order, lane after lane.
fn lane_order<T: SortKey>(src: &[T], l: Lanes, k: usize, ascend: bool) -> Vec<usize> {
    let lanes = l.outer * l.inner;
    let mut perm = vec![0usize; lanes * k];
    if k == 0 {
        return perm;
    }
    let flip = if ascend { 0 } else { u64::MAX };
    let gather = |lane: usize, scratch: &mut Vec<(u64, usize)>| {
        let (o, i) = (lane / l.inner, lane % l.inner);
        scratch.clear();
        scratch.extend((0..l.n).map(|t| (src[(o * l.n + t) * l.inner + i].key() ^ flip, t)));
    };
    if lanes == 1 {
        let mut scratch = Vec::with_capacity(l.n);
        gather(0, &mut scratch);
        order_lane(
            &mut scratch,
            k,
            &mut perm,
            l.n >= PAR_MIN && pool_shares_work(),
        );
    } else if lanes * l.n < PAR_MIN || !pool_shares_work() {
        let mut scratch = Vec::with_capacity(l.n);
        for (lane, dst) in perm.chunks_mut(k).enumerate() {
            gather(lane, &mut scratch);
            order_lane(&mut scratch, k, dst, false);
        }
    } else {
        perm.par_chunks_mut(k)
            .enumerate()
            .for_each_init(Vec::new, |scratch, (lane, dst)| {
                gather(lane, scratch);
                order_lane(scratch, k, dst, false);
            });
    }
    perm
}

/// Position in the output (`outer x k x inner`) of the `t`-th element of `lane`.
#[inline(always)]
fn out_pos(l: Lanes, k: usize, lane: usize, t: usize) -> usize {
    let (o, i) = (lane / l.inner, lane % l.inner);
    (o * k + t) * l.inner + i
}

fn write_values<T: Num>(src: &[T], l: Lanes, k: usize, perm: &[usize], out: &mut [T], add: bool) {
    for (lane, p) in perm.chunks(k.max(1)).enumerate().take(l.outer * l.inner) {
        let (o, i) = (lane / l.inner, lane % l.inner);
        for (t, &j) in p.iter().enumerate() {
            store(
                &mut out[out_pos(l, k, lane, t)],
                src[(o * l.n + j) * l.inner + i],
                add,
            );
        }
    }
}

fn write_indices<I: CastElem>(l: Lanes, k: usize, perm: &[usize], out: &mut [I], add: bool) {
    for (lane, p) in perm.chunks(k.max(1)).enumerate().take(l.outer * l.inner) {
        for (t, &j) in p.iter().enumerate() {
            store(
                &mut out[out_pos(l, k, lane, t)],
                I::from_scalar(Scalar::Int(j as i64)),
                add,
            );
        }
    }
}

fn write_mask<T: Num>(l: Lanes, k: usize, perm: &[usize], out: &mut [T], add: bool) {
    if !add {
        out.fill(T::ZERO);
    }
    for (lane, p) in perm.chunks(k.max(1)).enumerate().take(l.outer * l.inner) {
        let (o, i) = (lane / l.inner, lane % l.inner);
        for &j in p {
            store(&mut out[(o * l.n + j) * l.inner + i], T::ONE, add);
        }
    }
}

fn write_index_blob(l: Lanes, k: usize, perm: &[usize], out: &TBlob, add: bool) {
    crate::dispatch_dtype!(out.dtype, I => write_indices::<I>(l, k, perm, out.slice_mut(), add))
}

impl CpuKernel for SortOp {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req.iter().all(|r| *r == OpReq::Null) {
            return Ok(());
        }
        let data = &io.inputs[0];
        let (l, _) = self.lanes(&data.shape)?;
        let k = self.k_of(l.n)?;
        dispatch_num!(self.name, data.dtype, T => {
            let src = data.slice::<T>();
            let perm = lane_order(src, l, k, self.ascend);
            let add = |i: usize| io.req[i] == OpReq::Add;
            match self.ret {
                Ret::Value => {
                    if io.req[0] != OpReq::Null {
                        write_values(src, l, k, &perm, io.outputs[0].slice_mut::<T>(), add(0));
                    }
                }
                Ret::Indices => {
                    if io.req[0] != OpReq::Null {
                        write_index_blob(l, k, &perm, &io.outputs[0], add(0));
                    }
                }
                Ret::Mask => {
                    if io.req[0] != OpReq::Null {
                        write_mask(l, k, &perm, io.outputs[0].slice_mut::<T>(), add(0));
                    }
                }
                Ret::Both => {
                    if io.req[0] != OpReq::Null {
                        write_values(src, l, k, &perm, io.outputs[0].slice_mut::<T>(), add(0));
                    }
                    if io.req[1] != OpReq::Null {
                        write_index_blob(l, k, &perm, &io.outputs[1], add(1));
                    }
                }
            }
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<SortOp>(k);
}

#[cfg(test)]
mod tests {
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    fn x() -> crate::ndarray::NDArray {
        f32a(&[2, 5], &[3., 1., 2., 1., 5., 0., 4., 4., -1., 2.])
    }

    #[test]
    fn topk_returns() {
        let o = &run("topk", &[], &[x()])[0];
        assert_eq!(o.shape(), &[2, 1]);
        assert_eq!(f32s(o), vec![4., 1.]);
        let o = run("topk", &[("k", "2"), ("ret_typ", "both")], &[x()]);
        assert_eq!(f32s(&o[0]), vec![5., 3., 4., 4.]);
        assert_eq!(f32s(&o[1]), vec![4., 0., 1., 2.]);
        let o = &run("topk", &[("k", "2"), ("ret_typ", "mask")], &[x()])[0];
        assert_eq!(f32s(o), vec![1., 0., 0., 0., 1., 0., 1., 1., 0., 0.]);
        let o = &run("topk", &[("k", "2"), ("is_ascend", "True")], &[x()])[0];
        assert_eq!(f32s(o), vec![1., 3., 3., 0.]);
        let o = run(
            "topk",
            &[("k", "1"), ("axis", "0"), ("ret_typ", "both")],
            &[x()],
        );
        assert_eq!(o[0].shape(), &[1, 5]);
        assert_eq!(f32s(&o[0]), vec![3., 4., 4., 1., 5.]);
        assert_eq!(f32s(&o[1]), vec![0., 1., 1., 0., 0.]);
        let o = run(
            "topk",
            &[("k", "3"), ("axis", "None"), ("ret_typ", "both")],
            &[x()],
        );
        assert_eq!(o[0].shape(), &[3]);
        assert_eq!(f32s(&o[1]), vec![4., 6., 7.]);
        let o = &run(
            "topk",
            &[("k", "0"), ("ret_typ", "indices"), ("dtype", "int64")],
            &[x()],
        )[0];
        assert_eq!(values::<i64>(o), vec![4, 0, 2, 1, 3, 1, 2, 4, 0, 3]);
        let xi = array::<i32>(&[5], &[2, 1, 2, 1, 2]);
        let o = run(
            "topk",
            &[("k", "5"), ("ret_typ", "both"), ("dtype", "uint8")],
            &[xi],
        );
        assert_eq!(values::<i32>(&o[0]), vec![2, 2, 2, 1, 1]);
        assert_eq!(values::<u8>(&o[1]), vec![0, 2, 4, 1, 3]);
        assert!(try_run("topk", &[("k", "6")], &[x()]).is_err());
        assert!(try_run("topk", &[("axis", "2")], &[x()]).is_err());
        assert!(try_run("topk", &[("ret_typ", "foo")], &[x()]).is_err());
        assert!(try_run("topk", &[("dtype", "bool")], &[x()]).is_err());
        assert!(try_run("topk", &[], &[array::<bool>(&[2], &[true, false])]).is_err());
    }

    #[test]
    fn sort_and_argsort() {
        let o = &run("sort", &[], &[x()])[0];
        assert_eq!(f32s(o), vec![1., 1., 2., 3., 5., -1., 0., 2., 4., 4.]);
        let o = &run("sort", &[("axis", "0"), ("is_ascend", "False")], &[x()])[0];
        assert_eq!(f32s(o), vec![3., 4., 4., 1., 5., 0., 1., 2., -1., 2.]);
        let o = &run("sort", &[("axis", "None")], &[x()])[0];
        assert_eq!(o.shape(), &[10]);
        let o = &run("argsort", &[], &[x()])[0];
        assert_eq!(f32s(o), vec![1., 3., 2., 0., 4., 3., 0., 4., 1., 2.]);
        let o = &run(
            "argsort",
            &[("is_ascend", "0"), ("dtype", "int32")],
            &[f32a(&[7], &[2., 1., 2., 1., 2., 1., 2.])],
        )[0];
        assert_eq!(values::<i32>(o), vec![0, 2, 4, 6, 1, 3, 5]);
        let nan = f32a(&[5], &[1., f32::NAN, 3., f32::NAN, f32::NEG_INFINITY]);
        let o = &run("argsort", &[], std::slice::from_ref(&nan))[0];
        assert_eq!(f32s(o), vec![4., 0., 2., 1., 3.]);
        let o = &run("sort", &[("is_ascend", "False")], &[nan])[0];
        let v = f32s(o);
        assert!(v[0].is_nan() && v[1].is_nan() && v[2] == 3.);
    }

    #[test]
    fn keys_order_every_type() {
        let z = f32a(&[4], &[0.0, -0.0, -1.0, f32::MIN_POSITIVE]);
        assert_eq!(f32s(&run("argsort", &[], &[z])[0]), vec![2., 0., 1., 3.]);
        let big = array::<i64>(&[4], &[i64::MAX, i64::MIN, 0, -1]);
        let o = &run("argsort", &[("dtype", "int64")], &[big])[0];
        assert_eq!(values::<i64>(o), vec![1, 3, 2, 0]);
        let u = array::<u8>(&[3], &[255, 0, 128]);
        assert_eq!(
            values::<u8>(&run("sort", &[("is_ascend", "False")], &[u])[0]),
            vec![255, 128, 0]
        );
        let h = array::<half::f16>(&[3], &[2.0, -3.0, 0.5].map(half::f16::from_f32));
        let o = &run("sort", &[], &[h])[0];
        assert_eq!(
            values::<half::f16>(o),
            [-3.0, 0.5, 2.0].map(half::f16::from_f32).to_vec()
        );
        let d = array::<f64>(&[3], &[1e300, -1e300, f64::INFINITY]);
        assert_eq!(f32s(&run("argsort", &[], &[d])[0]), vec![1., 0., 2.]);
    }

    #[test]
    fn large_lanes_in_parallel() {
        let n = 1 << 18;
        let data: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32).collect();
        let a = f32a(&[n / 4, 4], &data);
        let o = &run("sort", &[("axis", "0")], std::slice::from_ref(&a))[0];
        let v = f32s(o);
        for c in 0..4 {
            for r in 1..n / 4 {
                assert!(v[r * 4 + c] >= v[(r - 1) * 4 + c]);
            }
        }
        let flat = f32a(&[n], &data);
        let o = &run("argsort", &[("dtype", "int64")], &[flat])[0];
        let idx = values::<i64>(o);
        for w in idx.windows(2) {
            let (a, b) = (data[w[0] as usize], data[w[1] as usize]);
            assert!(a < b || (a == b && w[0] < w[1]));
        }
    }
}

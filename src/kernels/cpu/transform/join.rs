//! CPU kernels of the operators that join and split arrays along an axis: `Concat`,
//! `stack` and `SliceChannel` (split).

use super::copy::{concat_bytes, emit, gather, source};
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::transform::axis_in;
use crate::op::transform::join::{Concat, SliceChannel, Stack};
use crate::op::transform::view::View;
use crate::op::OpContext;
use crate::shape::size_of;
use std::borrow::Cow;

/// Joins `io.inputs` along `axis` into the output: row `r` of the output (the index over
/// the axes before `axis`) is block `r` of each input in turn.
fn join(axis: usize, io: Blobs) -> Result<()> {
    let out = &io.outputs[0];
    let esize = out.dtype.size();
    let srcs: Vec<Cow<[u8]>> = io.inputs.iter().map(|b| source(b, out)).collect();
    let parts: Vec<(&[u8], usize)> = srcs
        .iter()
        .zip(io.inputs)
        .map(|(s, b)| (&s[..], size_of(&b.shape[axis..]) * esize))
        .collect();
    emit(out, io.req[0], |dst| {
        concat_bytes(&parts, dst);
        Ok(())
    })
}

impl CpuKernel for Concat {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        join(axis_in("Concat", self.dim, io.inputs[0].shape.len())?, io)
    }
}

impl CpuKernel for Stack {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        join(self.axis(io.inputs[0].shape.len())?, io)
    }
}

impl CpuKernel for SliceChannel {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        let s = &io.inputs[0].shape;
        let axis = self.check(s)?;
        let part = s[axis] / self.num_outputs;
        let base = View::of(s);
        for (i, (out, &r)) in io.outputs.iter().zip(io.req).enumerate() {
            let mut v = base.clone();
            v.shape[axis] = part;
            v.offset = (i * part) as isize * v.strides[axis];
            gather(&io.inputs[0], &v, out, r)?;
        }
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Concat>(k);
    cpu::add::<Stack>(k);
    cpu::add::<SliceChannel>(k);
}

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::kernels::cpu::testing::iota;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};

    #[test]
    fn concat() {
        let a = f32a(&[2, 2], &[1., 2., 3., 4.]);
        let b = f32a(&[2, 1], &[9., 8.]);
        let c = &run("Concat", &[("num_args", "2")], &[a.clone(), b.clone()])[0];
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(f32s(c), vec![1., 2., 9., 3., 4., 8.]);
        let d = &run("concat", &[("dim", "0")], &[a.clone(), a.clone()])[0];
        assert_eq!(f32s(d), vec![1., 2., 3., 4., 1., 2., 3., 4.]);
        let e = &run("concat", &[("dim", "-1")], &[a.clone(), b.clone()])[0];
        assert_eq!(f32s(e), f32s(c));
        assert!(try_run("concat", &[("dim", "0")], &[a.clone(), b.clone()]).is_err());
        assert!(try_run("concat", &[("dim", "2")], &[a.clone(), a.clone()]).is_err());
        assert!(try_run("concat", &[("num_args", "3")], &[a.clone(), a.clone()]).is_err());
        assert!(try_run("concat", &[], &[a.clone(), f32a(&[4], &[0.; 4])]).is_err());
        let i = array::<i32>(&[2, 2], &[1, 2, 3, 4]);
        assert!(try_run("concat", &[], &[a.clone(), i]).is_err());
        let big = iota(&[3, 100_000]);
        let cb = &run("concat", &[("dim", "1")], &[big.clone(), big.clone()])[0];
        let v = f32s(cb);
        assert_eq!(v[100_000], 0.);
        assert_eq!(v[200_001], 100_001.);
        let bools = array::<bool>(&[1, 2], &[true, false]);
        let cbool = &run("concat", &[("dim", "0")], &[bools.clone(), bools])[0];
        assert_eq!(values::<bool>(cbool), vec![true, false, true, false]);
    }

    #[test]
    fn stack() {
        let a = f32a(&[2], &[1., 2.]);
        let b = f32a(&[2], &[3., 4.]);
        let s = &run("stack", &[("num_args", "2")], &[a.clone(), b.clone()])[0];
        assert_eq!(s.shape(), &[2, 2]);
        assert_eq!(f32s(s), vec![1., 2., 3., 4.]);
        let t = &run("stack", &[("axis", "-1")], &[a.clone(), b.clone()])[0];
        assert_eq!(f32s(t), vec![1., 3., 2., 4.]);
        assert!(try_run("stack", &[("axis", "2")], &[a.clone(), b.clone()]).is_err());
        assert!(try_run("stack", &[], &[a, f32a(&[3], &[0.; 3])]).is_err());
        let x = iota(&[2, 3, 4]);
        assert_eq!(
            run("stack", &[("axis", "3")], &[x.clone(), x])[0].shape(),
            &[2, 3, 4, 2]
        );
    }

    #[test]
    fn split() {
        let x = iota(&[2, 3, 4]);
        let parts = run("SliceChannel", &[("num_outputs", "3")], &[x.clone()]);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1].shape(), &[2, 1, 4]);
        assert_eq!(f32s(&parts[1]), vec![4., 5., 6., 7., 16., 17., 18., 19.]);
        let p = run(
            "split",
            &[("num_outputs", "2"), ("axis", "-1")],
            &[x.clone()],
        );
        assert_eq!(&f32s(&p[1])[..4], &[2., 3., 6., 7.]);
        let q = run(
            "split",
            &[
                ("num_outputs", "2"),
                ("axis", "0"),
                ("squeeze_axis", "True"),
            ],
            &[x.clone()],
        );
        assert_eq!(q[1].shape(), &[3, 4]);
        assert_eq!(f32s(&q[1])[0], 12.);
        assert!(try_run("split", &[("num_outputs", "2")], &[x.clone()]).is_err());
        assert!(try_run("split", &[("num_outputs", "0")], &[x.clone()]).is_err());
        assert!(try_run(
            "split",
            &[("num_outputs", "2"), ("axis", "3")],
            &[x.clone()]
        )
        .is_err());
        assert!(try_run(
            "split",
            &[("num_outputs", "2"), ("axis", "2"), ("squeeze_axis", "1")],
            &[x]
        )
        .is_err());
        let v = f32a(&[2], &[5., 6.]);
        let s = run(
            "split",
            &[("num_outputs", "2"), ("axis", "0"), ("squeeze_axis", "1")],
            &[v],
        );
        assert_eq!(s[0].shape(), &[] as &[usize]);
        assert_eq!(f32s(&s[1]), vec![6.]);
    }
}

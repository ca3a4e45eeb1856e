//! CPU kernels of the operators that keep the data and change only the shape: `Reshape`
//! (with MXNet's special codes 0, -1, -2, -3, -4 and `reverse`), `Flatten`,
//! `expand_dims`, `squeeze`.

use super::copy::copy_same;
use crate::error::Result;
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::op::transform::reshape::SameData;
use crate::op::OpContext;

impl CpuKernel for SameData {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        copy_same(&io.inputs[0], &io.outputs[0], io.req[0])
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<SameData>(k);
}

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::kernels::cpu::testing::run_error;
    use crate::op::testutil::{array, f32a, f32s, run, try_run, values};
    use crate::op::transform::reshape::infer_codes;

    fn codes(spec: &[i64], s: &[usize], rev: bool) -> Option<Vec<usize>> {
        infer_codes("Reshape", spec, s, rev)
            .ok()
            .map(|v| v.to_vec())
    }

    #[test]
    fn reshape_codes_follow_mxnet() {
        let s = [2, 3, 4];
        assert_eq!(codes(&[0, -1], &s, false), Some(vec![2, 12]));
        assert_eq!(codes(&[-2], &s, false), Some(vec![2, 3, 4]));
        assert_eq!(codes(&[-3, 4], &s, false), Some(vec![6, 4]));
        assert_eq!(codes(&[-4, 1, 2, -2], &s, false), Some(vec![1, 2, 3, 4]));
        assert_eq!(codes(&[-4, -1, 1, -2], &s, false), Some(vec![2, 1, 3, 4]));
        assert_eq!(codes(&[0, -3], &s, false), Some(vec![2, 12]));
        assert_eq!(codes(&[2, -2], &s, false), Some(vec![2, 3, 4]));
        assert_eq!(codes(&[-2, 1], &s, false), Some(vec![2, 3, 4, 1]));
        assert_eq!(codes(&[0, -1, 0], &s, false), Some(vec![2, 3, 4]));
        assert_eq!(codes(&[-3, -1], &s, false), Some(vec![6, 4]));
        assert_eq!(codes(&[-4, 2, -1, 0, 0], &s, false), Some(vec![2, 1, 3, 4]));
        assert_eq!(codes(&[-1, 0], &[10, 5, 4], true), Some(vec![50, 4]));
        assert_eq!(codes(&[-1, 0], &[10, 5, 4], false), Some(vec![40, 5]));
        assert_eq!(codes(&[-3, -1], &[2, 3, 4, 5], true), Some(vec![12, 10]));
        assert_eq!(
            codes(&[0, 0, 0, -4, 5, 1], &[2, 3, 4, 5], false),
            Some(vec![2, 3, 4, 5, 1])
        );
        // Errors: MXNet's checks, plus sizes that do not match (which MXNet 1.9.1 lets by).
        assert_eq!(codes(&[4, 5], &s, false), None);
        assert_eq!(codes(&[5, -1], &s, false), None);
        assert_eq!(codes(&[-1, -1], &s, false), None);
        assert_eq!(codes(&[-5], &s, false), None);
        assert_eq!(codes(&[0, 0, 0, 0], &s, false), None);
        assert_eq!(codes(&[0, 0, -3], &s, false), None);
        assert_eq!(codes(&[-4, 3, 3, -2], &s, false), None);
        assert_eq!(codes(&[-4, -1, -1, -2], &s, false), None);
        assert_eq!(codes(&[-4, 1, -1, -2], &[2, 3, 4, 5], true), None);
        assert_eq!(codes(&[-1, 0], &[3, 0], false), None);
        assert_eq!(codes(&[-1, 0], &[0, 3], false), Some(vec![0, 3]));
        assert_eq!(codes(&[3, -1], &[2, 0], false), Some(vec![3, 0]));
    }

    #[test]
    fn reshape_op_values_and_errors() {
        let x = f32a(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let y = &run("reshape", &[("shape", "(3, -1)")], &[x.clone()])[0];
        assert_eq!(y.shape(), &[3, 2]);
        assert_eq!(f32s(y), vec![1., 2., 3., 4., 5., 6.]);
        let e = run_error("Reshape", &[("shape", "(4, 2)")], &[x.clone()]);
        assert_eq!(
            e,
            "Reshape: cannot reshape array of shape (2, 3) into shape (4, 2)"
        );
        assert!(try_run(
            "Reshape",
            &[("shape", "(4, 2)"), ("bogus", "1")],
            &[x.clone()]
        )
        .is_err());
        let t = &run("Reshape", &[("target_shape", "(3, 0)")], &[x.clone()])[0];
        assert_eq!(t.shape(), &[3, 2]);
        let k = &run(
            "Reshape",
            &[("target_shape", "(5, 0)"), ("keep_highest", "True")],
            &[x.clone()],
        )[0];
        assert_eq!(k.shape(), &[2, 3]);
        let one = f32a(&[1, 1], &[7.]);
        assert_eq!(
            run("Reshape", &[("shape", "()")], &[one])[0].shape(),
            &[] as &[usize]
        );
        assert!(try_run("Reshape", &[], &[x]).is_err());
        let b = array::<bool>(&[2, 2], &[true, false, false, true]);
        let r = &run("reshape", &[("shape", "(-1,)")], &[b])[0];
        assert_eq!(values::<bool>(r), vec![true, false, false, true]);
    }

    #[test]
    fn flatten_expand_squeeze() {
        let x = array::<i64>(&[2, 3, 1], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(run("Flatten", &[], &[x.clone()])[0].shape(), &[2, 3]);
        assert_eq!(
            run("flatten", &[], &[f32a(&[3], &[1., 2., 3.])])[0].shape(),
            &[3, 1]
        );
        let e = &run("expand_dims", &[("axis", "-1")], &[x.clone()])[0];
        assert_eq!(e.shape(), &[2, 3, 1, 1]);
        assert_eq!(values::<i64>(e), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            run("expand_dims", &[("axis", "-4")], &[x.clone()])[0].shape(),
            &[1, 2, 3, 1]
        );
        assert!(try_run("expand_dims", &[("axis", "4")], &[x.clone()]).is_err());
        assert!(try_run("expand_dims", &[("axis", "-5")], &[x.clone()]).is_err());
        assert!(try_run("expand_dims", &[], &[x.clone()]).is_err());
        let z = f32a(&[1, 2, 1, 3], &[0.; 6]);
        assert_eq!(run("squeeze", &[], &[z.clone()])[0].shape(), &[2, 3]);
        assert_eq!(
            run("squeeze", &[("axis", "2")], &[z.clone()])[0].shape(),
            &[1, 2, 3]
        );
        assert_eq!(
            run("squeeze", &[("axis", "(0, -2)")], &[z.clone()])[0].shape(),
            &[2, 3]
        );
        assert!(try_run("squeeze", &[("axis", "1")], &[z.clone()]).is_err());
        assert!(try_run("squeeze", &[("axis", "4")], &[z.clone()]).is_err());
        assert!(try_run("squeeze", &[("axis", "(0, 0)")], &[z]).is_err());
        assert_eq!(
            run("squeeze", &[], &[f32a(&[1, 1], &[5.])])[0].shape(),
            &[1]
        );
        assert_eq!(
            run("squeeze", &[("axis", "0")], &[f32a(&[1], &[5.])])[0].shape(),
            &[1]
        );
    }
}

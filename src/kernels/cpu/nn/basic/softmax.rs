//! CPU kernels of `softmax`, `log_softmax` (with `axis`, `temperature`, `dtype` and, for
//! `softmax`, a valid `length` input) and `SoftmaxActivation`, with their backward.

use super::softmax_kernel::{self as kernel, Layout, Spec};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::cpu::{self, Blobs, CpuKernel};
use crate::kernels::Kernels;
use crate::ndarray::TBlob;
use crate::op::nn::softmax::{
    Softmax, SoftmaxActivation, SoftmaxActivationBackward, SoftmaxBackward, SoftmaxParams,
};
use crate::op::{OpContext, OpReq, Operator};
use crate::{dispatch_float, dispatch_float_pair};

/// Valid lengths from an integer array, one per position; negative values count as 0.
fn lengths(op: &str, b: &TBlob) -> Result<Vec<usize>> {
    Ok(match b.dtype {
        DType::I32 => b
            .slice::<i32>()
            .iter()
            .map(|&v| v.max(0) as usize)
            .collect(),
        DType::I64 => b
            .slice::<i64>()
            .iter()
            .map(|&v| v.max(0) as usize)
            .collect(),
        DType::I8 => b.slice::<i8>().iter().map(|&v| v.max(0) as usize).collect(),
        DType::U8 => b.slice::<u8>().iter().map(|&v| v as usize).collect(),
        other => {
            return Err(Error::Type(format!(
                "{op}: length must have an integer dtype, got {other}"
            )))
        }
    })
}

impl SoftmaxParams {
    fn spec<'a>(&self, shape: &[usize], lens: Option<&'a [usize]>) -> Result<Spec<'a>> {
        Ok(Spec {
            layout: self.layout(shape)?,
            temperature: self.temperature,
            log: self.log,
            lengths: lens,
        })
    }
}

impl CpuKernel for Softmax {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let lens = match self.0.use_length {
            true => Some(lengths(self.0.name, &io.inputs[1])?),
            false => None,
        };
        let spec = self.0.spec(&io.inputs[0].shape, lens.as_deref())?;
        let add = io.req[0] == OpReq::Add;
        let (it, ot) = (io.inputs[0].dtype, io.outputs[0].dtype);
        // Written over its own input, the softmax reads a copy.
        let copy;
        let x = if super::common::overlaps(&io.inputs[0], &io.outputs[0]) {
            copy = io.inputs[0].to_host_vec();
            TBlob::from_raw(copy.as_ptr() as *mut u8, io.inputs[0].shape.clone(), it)
        } else {
            io.inputs[0].clone()
        };
        dispatch_float_pair!(self.0.name, it, ot, I, O, F => {
            kernel::forward::<I, O, F>(x.slice::<I>(), io.outputs[0].slice_mut::<O>(), &spec, add)
        });
        Ok(())
    }
}

impl CpuKernel for SoftmaxBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let lens = match self.p.use_length {
            true => Some(lengths(self.name, &io.inputs[self.n_inputs() - 1])?),
            false => None,
        };
        let spec = self.p.spec(&io.inputs[1].shape, lens.as_deref())?;
        let add = io.req[0] == OpReq::Add;
        let (ot, dt) = (io.inputs[1].dtype, io.outputs[0].dtype);
        dispatch_float_pair!(self.name, ot, dt, O, D, F => {
            kernel::backward::<O, D, F>(
                io.inputs[0].slice::<O>(),
                io.inputs[1].slice::<O>(),
                io.outputs[0].slice_mut::<D>(),
                &spec,
                add,
            )
        });
        Ok(())
    }
}

/// A plain softmax of `io.inputs[0]` over the layout `layout` gives, written as
/// `io.req[0]` says, for the ops whose output must not share memory with the data.
pub(super) fn plain_forward(
    op: &str,
    io: Blobs,
    layout: impl FnOnce() -> Result<Layout>,
) -> Result<()> {
    if io.req[0] == OpReq::Null {
        return Ok(());
    }
    let spec = Spec::plain(layout()?);
    if super::common::overlaps(&io.inputs[0], &io.outputs[0]) {
        return Err(Error::Runtime(format!(
            "{op}: the output must not share memory with the data"
        )));
    }
    dispatch_float!(op, io.inputs[0].dtype, T, F => {
        kernel::forward::<T, T, F>(
            io.inputs[0].slice::<T>(),
            io.outputs[0].slice_mut::<T>(),
            &spec,
            io.req[0] == OpReq::Add,
        )
    });
    Ok(())
}

impl CpuKernel for SoftmaxActivation {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        plain_forward(self.name(), io, || self.layout(&io.inputs[0].shape))
    }
}

impl CpuKernel for SoftmaxActivationBackward {
    fn forward(&self, _: &mut OpContext, io: Blobs) -> Result<()> {
        if io.req[0] == OpReq::Null {
            return Ok(());
        }
        let fwd = SoftmaxActivation {
            channel: self.channel,
        };
        let spec = Spec::plain(fwd.layout(&io.inputs[1].shape)?);
        dispatch_float!(self.name(), io.inputs[0].dtype, T, F => {
            kernel::backward::<T, T, F>(
                io.inputs[0].slice::<T>(),
                io.inputs[1].slice::<T>(),
                io.outputs[0].slice_mut::<T>(),
                &spec,
                io.req[0] == OpReq::Add,
            )
        });
        Ok(())
    }
}

/// Registers the CPU kernels of the operators defined here.
pub(crate) fn register_kernels(k: &mut Kernels) {
    cpu::add::<Softmax>(k);
    cpu::add::<SoftmaxBackward>(k);
    cpu::add::<SoftmaxActivation>(k);
    cpu::add::<SoftmaxActivationBackward>(k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::kernels::cpu::testing::{build, close, f64s, run_req};
    use crate::op::testutil::{array, f32a, f32s, gradcheck, run, try_run};
    use crate::op::{Grad, OpRef};
    use crate::shape::Shape;

    const X: [f32; 12] = [1.0, 2.0, 3.0, 0.5, -1.0, 0.0, 4.0, 2.0, 0.3, 0.2, 0.1, -5.0];

    fn op(name: &str, attrs: &[(&str, &str)]) -> OpRef {
        build(name, attrs)
    }

    #[test]
    fn forward_matches_mxnet() {
        let x = f32a(&[3, 4], &X);
        let y = run("softmax", &[], std::slice::from_ref(&x));
        close(
            &f64s(&y[0]),
            &[
                0.08536888659000397,
                0.23205670714378357,
                0.6307954788208008,
                0.051778849214315414,
                0.0058066281490027905,
                0.01578405126929283,
                0.8617801070213318,
                0.11662925034761429,
                0.36649376153945923,
                0.3316172659397125,
                0.3000596761703491,
                0.001829387852922082,
            ],
            1e-6,
        );
        let y = run(
            "softmax",
            &[("axis", "0"), ("temperature", "2.0")],
            std::slice::from_ref(&x),
        );
        close(
            &f64s(&y[0]),
            &[
                0.4824933409690857,
                0.5635551810264587,
                0.34682583808898926,
                0.3143736720085144,
                0.17749938368797302,
                0.20732037723064423,
                0.5718191266059875,
                0.6655290722846985,
                0.34000730514526367,
                0.22912444174289703,
                0.0813550353050232,
                0.020097237080335617,
            ],
            1e-6,
        );
        let y = run("log_softmax", &[], std::slice::from_ref(&x));
        close(
            &f64s(&y[0])[..4],
            &[
                -2.460771083831787,
                -1.4607712030410767,
                -0.4607711732387543,
                -2.960771083831787,
            ],
            // MXNet's own float32 result is 2e-6 away from the exact value here.
            1e-5,
        );
        let y = run(
            "log_softmax",
            &[("axis", "-2"), ("temperature", "0.5")],
            std::slice::from_ref(&x),
        );
        close(
            &f64s(&y[0]),
            &[
                -0.2350030392408371,
                -0.0446285605430603,
                -2.127288818359375,
                -3.0485880374908447,
                -4.2350029945373535,
                -4.044628620147705,
                -0.12728886306285858,
                -0.04858812317252159,
                -1.6350029706954956,
                -3.6446285247802734,
                -7.927289009094238,
                -14.048587799072266,
            ],
            1e-5,
        );
        let y = run("softmax", &[("dtype", "float64")], &[x]);
        assert_eq!(y[0].dtype(), DType::F64);
        close(&f64s(&y[0])[..1], &[0.08536888659000397], 1e-6);
    }

    #[test]
    fn length_masks_the_tail() {
        let x = f32a(&[3, 4], &X);
        let len = array::<i32>(&[3], &[2, 4, 1]);
        let y = run("softmax", &[("use_length", "True")], &[x.clone(), len]);
        close(
            &f64s(&y[0]),
            &[
                0.2689414, 0.7310586, 0.0, 0.0, 0.0058066, 0.0157841, 0.86178, 0.1166292, 1.0, 0.0,
                0.0, 0.0,
            ],
            1e-6,
        );
        let len = array::<i32>(&[4], &[1, 2, 3, 1]);
        let y = run(
            "softmax",
            &[("use_length", "1"), ("axis", "0")],
            &[x.clone(), len],
        );
        close(
            &f64s(&y[0]),
            &[
                1.0, 0.880797, 0.2650197, 1.0, 0.0, 0.1192029, 0.7203982, 0.0, 0.0, 0.0, 0.0145822,
                0.0,
            ],
            1e-6,
        );
        // Gradient: MXNet gives these for the output gradient 0.1 * i - 0.4.
        let sm = op("softmax", &[("use_length", "True")]);
        let Grad::Op(g) = sm.gradient() else {
            panic!("no gradient")
        };
        let len = array::<i32>(&[3], &[2, 4, 1]);
        let y = run("softmax", &[("use_length", "True")], &[x, len.clone()]);
        let og = f32a(
            &[3, 4],
            &(0..12).map(|i| i as f32 * 0.1 - 0.4).collect::<Vec<_>>(),
        );
        let dx =
            crate::imperative::invoke(&g.op, &[og, y[0].clone(), len], None, None, true).unwrap();
        close(
            &f64s(&dx[0]),
            &[
                -0.0196612, 0.0196612, 0.0, 0.0, -0.0012131, -0.0017192, -0.0076898, 0.0106222,
                0.0, 0.0, 0.0, 0.0,
            ],
            1e-5,
        );
        assert!(try_run(
            "softmax",
            &[("use_length", "1")],
            &[f32a(&[3, 4], &X), f32a(&[3], &[1.0; 3])]
        )
        .is_err());
    }

    #[test]
    fn backward_matches_mxnet() {
        let x = f32a(&[3, 4], &X);
        let og = f32a(
            &[3, 4],
            &(0..12).map(|i| i as f32 * 0.1 - 0.4).collect::<Vec<_>>(),
        );
        let sm = op("softmax", &[("temperature", "2")]);
        let y = crate::imperative::invoke(&sm, std::slice::from_ref(&x), None, None, true).unwrap();
        let Grad::Op(g) = sm.gradient() else {
            panic!("no gradient")
        };
        let dx = crate::imperative::invoke(&g.op, &[og.clone(), y[0].clone()], None, None, true)
            .unwrap();
        close(
            &f64s(&dx[0]),
            &[
                -0.012472148984670639,
                -0.007149707991629839,
                0.010327068157494068,
                0.009294792078435421,
                -0.005289546679705381,
                -0.0044525437988340855,
                -0.0013603174593299627,
                0.011102404445409775,
                -0.017353318631649017,
                -0.0002562006120570004,
                0.01521452609449625,
                0.0023949788883328438,
            ],
            1e-5,
        );
        let ls = op("log_softmax", &[]);
        let y = crate::imperative::invoke(&ls, &[x], None, None, true).unwrap();
        let Grad::Op(g) = ls.gradient() else {
            panic!("no gradient")
        };
        let dx = crate::imperative::invoke(&g.op, &[og, y[0].clone()], None, None, true).unwrap();
        close(
            &f64s(&dx[0])[..4],
            &[
                -0.314630925655365,
                -0.06794276833534241,
                0.4307970404624939,
                -0.04822102561593056,
            ],
            1e-5,
        );
    }

    #[test]
    fn gradients_are_numeric() {
        let v: Vec<f64> = (0..24).map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.3).collect();
        let x = array::<f64>(&[2, 3, 4], &v);
        for axis in ["-1", "1", "0"] {
            gradcheck(
                &op("softmax", &[("axis", axis), ("temperature", "1.5")]),
                std::slice::from_ref(&x),
                &[0],
                1e-6,
                1e-6,
            );
            gradcheck(
                &op("log_softmax", &[("axis", axis)]),
                std::slice::from_ref(&x),
                &[0],
                1e-6,
                1e-6,
            );
        }
        for mode in ["instance", "channel"] {
            gradcheck(
                &op("SoftmaxActivation", &[("mode", mode)]),
                std::slice::from_ref(&x),
                &[0],
                1e-6,
                1e-6,
            );
        }
        let x32 = array::<f32>(&[2, 3], &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
        let sm = op("softmax", &[("dtype", "float64")]);
        let Grad::Op(g) = sm.gradient() else {
            panic!("no gradient")
        };
        let y =
            crate::imperative::invoke(&sm, std::slice::from_ref(&x32), None, None, true).unwrap();
        let og = array::<f64>(&[2, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let dx =
            crate::imperative::invoke(&g.op, &[og, y[0].clone(), x32], None, None, true).unwrap();
        assert_eq!(dx[0].dtype(), DType::F32);
    }

    #[test]
    fn softmax_activation_matches_mxnet() {
        let x = f32a(
            &[2, 3, 2, 2],
            &(0..24).map(|i| i as f32 * 0.1 - 1.0).collect::<Vec<_>>(),
        );
        let y = run("SoftmaxActivation", &[], std::slice::from_ref(&x));
        close(
            &f64s(&y[0])[..2],
            &[0.47502079606056213, 0.5249791741371155],
            1e-6,
        );
        let y = run("SoftmaxActivation", &[("mode", "channel")], &[x]);
        close(
            &f64s(&y[0])[..12],
            &[
                0.21198272705078125,
                0.21198274195194244,
                0.21198272705078125,
                0.21198272705078125,
                0.316241055727005,
                0.316241055727005,
                0.316241055727005,
                0.316241055727005,
                0.47177624702453613,
                0.47177624702453613,
                0.47177624702453613,
                0.47177624702453613,
            ],
            1e-6,
        );
    }

    #[test]
    fn requests_shapes_and_errors() {
        let sm = op("softmax", &[]);
        let x = f32a(&[2, 2], &[0.0, 0.0, 1.0, 1.0]);
        run_req(
            &sm,
            std::slice::from_ref(&x),
            std::slice::from_ref(&x),
            &[OpReq::WriteInplace],
        );
        assert_eq!(f32s(&x), vec![0.5; 4]);
        let out = f32a(&[2, 2], &[1.0; 4]);
        run_req(
            &sm,
            std::slice::from_ref(&x),
            std::slice::from_ref(&out),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&out), vec![1.5; 4]);
        let Grad::Op(g) = sm.gradient() else {
            panic!("no gradient")
        };
        let dx = f32a(&[2, 2], &[1.0; 4]);
        run_req(
            &g.op,
            &[f32a(&[2, 2], &[1.0, 0.0, 0.0, 0.0]), x.clone()],
            std::slice::from_ref(&dx),
            &[OpReq::Add],
        );
        assert_eq!(f32s(&dx), vec![1.25, 0.75, 1.0, 1.0]);

        let sl = op("softmax", &[("use_length", "True"), ("axis", "1")]);
        assert_eq!(sl.input_names().unwrap(), vec!["data", "length"]);
        let mut ins = vec![Some(Shape::from_slice(&[2, 3, 4])), None];
        let mut outs = vec![None];
        sl.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[1].as_deref(), Some(&[2usize, 4][..]));
        let mut ins = vec![None];
        let mut outs = vec![Some(Shape::from_slice(&[5]))];
        sm.infer_shape_partial(&mut ins, &mut outs).unwrap();
        assert_eq!(ins[0].as_deref(), Some(&[5usize][..]));

        assert!(try_run("softmax", &[("axis", "2")], &[f32a(&[2, 2], &[0.0; 4])]).is_err());
        assert!(try_run("softmax", &[("dtype", "int32")], &[f32a(&[2], &[0.0; 2])]).is_err());
        assert!(try_run("softmax", &[], &[array::<i32>(&[2], &[0; 2])]).is_err());
        assert!(try_run(
            "log_softmax",
            &[("use_length", "1")],
            &[f32a(&[2], &[0.0; 2])]
        )
        .is_err());
        assert!(try_run(
            "SoftmaxActivation",
            &[("mode", "pixel")],
            &[f32a(&[2], &[0.0; 2])]
        )
        .is_err());
    }
}

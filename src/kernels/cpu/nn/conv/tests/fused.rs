//! The fused convolution kernel against the layers it stands for, run one by one.

use super::{build, close, f64s, seq64};
use crate::kernels::cpu::testing::run_with;
use crate::op::nn::batch_norm::BatchNorm;
use crate::op::nn::convolution::Convolution;
use crate::op::nn::fused_conv::FusedConv;
use crate::op::testutil::{array, run};
use crate::op::{OpRef, OpReq};
use std::sync::Arc;

fn downcast<T: Clone + 'static>(op: &OpRef) -> T {
    op.as_any()
        .downcast_ref::<T>()
        .expect("the built operator")
        .clone()
}

#[test]
fn every_part_and_request_matches_the_layers_one_by_one() {
    let xs = [2, 4, 7, 6];
    let conv_attrs = [("kernel", "(3,3)"), ("pad", "(1,1)"), ("num_filter", "5")];
    let bn_attrs = [("fix_gamma", "False"), ("eps", "0.001")];
    let x = seq64(&xs, 7, 11, 0.5);
    let w = seq64(&[5, 4, 3, 3], 5, 13, 0.6);
    let b = seq64(&[5], 3, 7, 0.2);
    let (gamma, beta) = (seq64(&[5], 2, 5, -0.6), seq64(&[5], 3, 4, 0.1));
    let (mean, var) = (seq64(&[5], 4, 7, 0.3), seq64(&[5], 3, 5, -0.5));
    let residual = seq64(&[2, 5, 7, 6], 5, 9, 0.4);
    for bias in [false, true] {
        for with_bn in [false, true] {
            for with_residual in [false, true] {
                let mut attrs = conv_attrs.to_vec();
                attrs.push(("no_bias", if bias { "False" } else { "True" }));
                let conv = build("Convolution", &attrs);
                let bn = build("BatchNorm", &bn_attrs);
                let fused: OpRef = Arc::new(FusedConv {
                    conv: downcast::<Convolution>(&conv),
                    bn: with_bn.then(|| downcast::<BatchNorm>(&bn)),
                    residual: with_residual,
                    relu: true,
                });
                let mut ins = vec![x.clone(), w.clone()];
                let mut conv_ins = ins.clone();
                if bias {
                    ins.push(b.clone());
                    conv_ins.push(b.clone());
                }
                let mut want = run("Convolution", &attrs, &conv_ins).remove(0);
                if with_bn {
                    ins.extend([gamma.clone(), beta.clone(), mean.clone(), var.clone()]);
                    let bn_ins = [want, gamma.clone(), beta.clone(), mean.clone(), var.clone()];
                    want = run("BatchNorm", &bn_attrs, &bn_ins).remove(0);
                }
                if with_residual {
                    ins.push(residual.clone());
                    want = run("elemwise_add", &[], &[want, residual.clone()]).remove(0);
                }
                let want = f64s(&run("relu", &[], &[want]).remove(0));
                for (req, base) in [(OpReq::Write, 0.0), (OpReq::Add, 1.25)] {
                    let out = array(&[2, 5, 7, 6], &vec![base; want.len()]);
                    run_with(&fused, &ins, std::slice::from_ref(&out), &[req], false);
                    let expect: Vec<f64> = want.iter().map(|v| v + base).collect();
                    close(&f64s(&out), &expect, 1e-12);
                }
            }
        }
    }
}

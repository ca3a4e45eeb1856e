//! Timing of LeNet's two convolution layers, forward and backward (run with
//! `cargo test --release -- --ignored lenet_conv_timing --nocapture`).

use super::{build, seq32};
use crate::ndarray::NDArray;
use crate::op::{Grad, OpContext, OpRef, OpReq};
use std::time::Instant;

fn zeros(shape: &[usize]) -> NDArray {
    seq32(shape, 0, 1, 0.0)
}

/// Milliseconds per forward+backward of one layer, the data gradient wanted or not.
fn time_layer(op: &OpRef, x: &[usize], w: &[usize], out: &[usize], data_grad: bool) -> f64 {
    let ins = [
        seq32(x, 7, 11, 0.5),
        seq32(w, 5, 13, 0.6),
        seq32(&[w[0]], 3, 7, 0.2),
    ];
    let y = zeros(out);
    let og = seq32(out, 3, 7, 0.3);
    let grads = [zeros(x), zeros(w), zeros(&[w[0]])];
    let Grad::Op(g) = op.gradient() else {
        panic!("no gradient")
    };
    for a in ins.iter().chain(&grads).chain([&y, &og]) {
        a.wait_to_read().unwrap();
    }
    let ib: Vec<_> = ins.iter().map(|a| a.blob()).collect();
    let bin = [og.blob(), ins[0].blob(), ins[1].blob()];
    let gb: Vec<_> = grads.iter().map(|a| a.blob()).collect();
    let yb = [y.blob()];
    let breq = [
        if data_grad { OpReq::Write } else { OpReq::Null },
        OpReq::Write,
        OpReq::Write,
    ];
    let mut ctx = OpContext::new(crate::context::Context::cpu(0), true);
    let mut step = || {
        crate::kernels::run_kernel(
            op.as_ref(),
            &mut ctx,
            crate::kernels::Blobs::new(&ib, &yb, &[OpReq::Write]),
        )
        .unwrap();
        crate::kernels::run_kernel(
            g.op.as_ref(),
            &mut ctx,
            crate::kernels::Blobs::new(&bin, &gb, &breq),
        )
        .unwrap();
    };
    for _ in 0..5 {
        step();
    }
    let iters = 50;
    let t = Instant::now();
    for _ in 0..iters {
        step();
    }
    t.elapsed().as_secs_f64() * 1e3 / iters as f64
}

#[test]
#[ignore]
fn lenet_conv_timing() {
    let c1 = build("Convolution", &[("kernel", "(5,5)"), ("num_filter", "20")]);
    let c2 = build("Convolution", &[("kernel", "(5,5)"), ("num_filter", "50")]);
    let t1 = time_layer(
        &c1,
        &[64, 1, 28, 28],
        &[20, 1, 5, 5],
        &[64, 20, 24, 24],
        false,
    );
    let t2 = time_layer(
        &c2,
        &[64, 20, 12, 12],
        &[50, 20, 5, 5],
        &[64, 50, 8, 8],
        true,
    );
    println!(
        "conv1 fwd+bwd {t1:.3} ms, conv2 fwd+bwd {t2:.3} ms, total {:.3} ms",
        t1 + t2
    );
}

"""Composite operators on GPUs against the CPU: their parts run the GPU kernels, bound
(forward and backward) and imperatively. Runs on real GPUs, and in CI on fake ones
(``RSMX_FAKE_GPU=2``)."""

from __future__ import annotations

import numpy as np
import pytest
import rsmx as mx
from gpu_bind import bind_and_run, both

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(gpu, cpu, tol=1e-4):
    np.testing.assert_allclose(gpu.asnumpy(), cpu.asnumpy(), rtol=tol, atol=tol)


CASES = {
    "layer_norm": (lambda d: mx.sym.LayerNorm(d, name="ln"), (3, 4, 5)),
    "instance_norm": (lambda d: mx.sym.InstanceNorm(d, name="in"), (2, 3, 4, 4)),
    "group_norm": (lambda d: mx.sym.GroupNorm(d, num_groups=2, name="gn"), (2, 4, 3, 3)),
    "l2_norm": (lambda d: mx.sym.L2Normalization(d, mode="channel"), (2, 3, 4, 4)),
    "lrn": (lambda d: mx.sym.LRN(d, nsize=3), (2, 5, 3, 3)),
    "pad_reflect": (lambda d: mx.sym.Pad(d, mode="reflect", pad_width=(0, 0, 0, 0, 1, 2, 2, 1)), (1, 2, 4, 5)),
    "upsampling": (lambda d: mx.sym.UpSampling(d, scale=2, sample_type="nearest", num_args=1), (1, 2, 3, 3)),
    "correlation": (lambda d: mx.sym.Correlation(d, d * 0.5, kernel_size=3, max_displacement=1, pad_size=1), (1, 2, 5, 5)),
    "smooth_l1": (lambda d: mx.sym.smooth_l1(d, scalar=2.0), (4, 5)),
    "gemm2": (lambda d: mx.sym.linalg.gemm2(d, d, transpose_b=True), (2, 3, 4)),
    "makediag": (lambda d: mx.sym.linalg.makediag(d, offset=-2), (2, 3)),
    "trian_upper": (lambda d: mx.sym.linalg.maketrian(
        mx.sym.linalg.extracttrian(d, offset=1) * 2, offset=1), (2, 4, 4)),
    "trian_lower": (lambda d: mx.sym.linalg.extracttrian(d, lower=True), (3, 3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_composite_forward_and_backward_match_the_cpu(case):
    make, shape = CASES[case]
    sym = make(mx.sym.Variable("data"))
    names = sym.list_arguments()
    args = {"data": rand(*shape)}
    shapes, out_shapes, _ = sym.infer_shape(data=shape)
    for n, s in zip(names, shapes, strict=True):
        if n != "data":
            args[n] = rand(*s)
    heads = [rand(*out_shapes[0])]
    runs = [bind_and_run(sym, args, ctx, grad=names, heads=heads) for ctx in (mx.cpu(), mx.gpu(0))]
    close(runs[1].outputs[0], runs[0].outputs[0])
    for n in names:
        close(runs[1].grad_dict[n], runs[0].grad_dict[n])


def test_sequence_mask_and_imperative_calls_on_the_gpu():
    x_cpu, x_gpu = both(rand(4, 3, 2))
    l_cpu, l_gpu = both(np.array([1, 4, 2], dtype=np.float32))
    for f in (
        lambda x, ln: mx.nd.SequenceMask(x, ln, use_sequence_length=True, value=-2.0),
        lambda x, ln: mx.nd.SequenceLast(x, ln, use_sequence_length=True),
        lambda x, ln: mx.nd.SequenceReverse(x, ln, use_sequence_length=True),
    ):
        got = f(x_gpu, l_gpu)
        assert got.context == mx.gpu(0)
        close(got, f(x_cpu, l_cpu))
    m_cpu, m_gpu = both(rand(4, 5))
    close(mx.nd.diag(m_gpu, k=1), mx.nd.diag(m_cpu, k=1))
    assert mx.nd.contrib.allclose(m_gpu, m_gpu).asnumpy() == 1

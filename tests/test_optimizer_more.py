"""FTML, LAMB, LARS and LBSGD: updates against MXNet 1.9.1's (literal values below),
against their formulas written with numpy, registry names, multi-precision and lists of
weights; and ``mx.test_utils.compare_optimizer``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError
from rsmx.test_utils import compare_ndarray_tuple, compare_optimizer

pytestmark = pytest.mark.timeout(60)

W0 = np.array([[0.5, -1.0, 0.25], [1.5, -0.75, 2.0]], dtype=np.float32)
GRADS = [
    np.array([[0.1, -0.2, 0.3], [-0.4, 0.5, -0.6]], dtype=np.float32),
    np.array([[0.7, 0.1, -0.3], [0.2, -0.9, 0.4]], dtype=np.float32),
    np.array([[-0.5, 0.3, 0.2], [0.6, 0.1, -0.8]], dtype=np.float32),
]

# (optimizer name, settings) -> the weight after the three GRADS steps from W0, as
# MXNet 1.9.1 computes it.
CASES = {
    "ftml": ("ftml", {"learning_rate": 0.1}),
    "ftml_opts": ("ftml", {"learning_rate": 0.05, "beta1": 0.5, "beta2": 0.9, "wd": 0.1,
                           "clip_gradient": 0.3, "rescale_grad": 2.0}),
    "lamb": ("lamb", {"learning_rate": 0.1}),
    "lamb_opts": ("lamb", {"learning_rate": 0.1, "wd": 0.1, "clip_gradient": 0.3,
                           "rescale_grad": 2.0, "bias_correction": False,
                           "lower_bound": 0.5, "upper_bound": 2.0}),
    "lars": ("lars", {"learning_rate": 0.1}),
    "lars_mom": ("lars", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.1, "eta": 0.01,
                          "eps": 1e-3, "clip_gradient": 0.5}),
    "lbsgd": ("lbsgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.1}),
    "lbsgd_scale": ("lbsgd", {"learning_rate": 0.1, "momentum": 0.5, "batch_scale": 2,
                              "warmup_epochs": 1, "updates_per_epoch": 4}),
    "lbsgd_lars": ("lbsgd", {"learning_rate": 0.1, "warmup_strategy": "lars", "wd": 0.1}),
}
EXPECTED = {
    "ftml": [[0.3635336458683014, -1.0103756189346313, 0.17481431365013123],
             [1.4896245002746582, -0.781289279460907, 2.116598129272461]],
    "ftml_opts": [[0.4439292252063751, -0.9998455047607422, 0.20476190745830536],
                  [1.4880952835083008, -0.780772864818573, 2.0452380180358887]],
    "lamb": [[0.07794543355703354, -0.939395010471344, 0.06704539805650711],
             [1.5606052875518799, -0.7021366953849792, 2.3522775173187256]],
    "lamb_opts": [[0.17210593819618225, -0.9635410904884338, 0.08584941923618317],
                  [1.4458723068237305, -0.8750120401382446, 2.135974168777466]],
    "lars": [[0.49993324279785156, -1.000035285949707, 0.24992960691452026],
             [1.499929428100586, -0.7499707937240601, 2.0002825260162354]],
    "lars_mom": [[0.49802055954933167, -0.9985207319259644, 0.24849851429462433],
                 [1.499070167541504, -0.7506875395774841, 2.000356912612915]],
    "lbsgd": [[0.36316850781440735, -0.9398369789123535, 0.19263175129890442],
              [1.4256525039672852, -0.6817892789840698, 2.0534839630126953]],
    "lbsgd_scale": [[0.4399999976158142, -0.9925000071525574, 0.25],
                    [1.5149999856948853, -0.7200000286102295, 2.015000104904175]],
    "lbsgd_lars": [[0.41553351283073425, -0.974829912185669, 0.19023503363132477],
                   [1.3471827507019043, -0.6646630167961121, 2.086249589920044]],
}


def _run(opt, weights, grads_per_step, as_list=False):
    """Applies every step of gradients to ``weights`` (numpy arrays); the NDArrays and
    states after."""
    ws = [mx.nd.array(w, dtype=w.dtype) for w in weights]
    states = [opt.create_state_multi_precision(i, w) for i, w in enumerate(ws)]
    for grads in grads_per_step:
        gs = [mx.nd.array(g, dtype=w.dtype) for g, w in zip(grads, weights, strict=True)]
        if as_list:
            opt.update_multi_precision(list(range(len(ws))), ws, gs, states)
        else:
            for i, (w, g, s) in enumerate(zip(ws, gs, states, strict=True)):
                opt.update_multi_precision(i, w, g, s)
    return ws, states


@pytest.mark.parametrize("case", sorted(CASES))
def test_update_matches_mxnet(case):
    name, settings = CASES[case]
    opt = mx.optimizer.create(name, **settings)
    (w,), _ = _run(opt, [W0], [[g] for g in GRADS])
    np.testing.assert_allclose(w.asnumpy(), np.array(EXPECTED[case]), rtol=1e-5, atol=1e-6)


def test_lists_of_weights_match_mxnet():
    second = W0[0].copy()
    steps = [[g, g[0]] for g in GRADS]
    sched = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=0.1)
    lars = mx.optimizer.LARS(learning_rate=0.1, momentum=0.9, lr_scheduler=sched,
                             param_idx2name={0: "fc_weight", 1: "fc_bias"})
    ws, _ = _run(lars, [W0, second], steps, as_list=True)
    np.testing.assert_allclose(ws[0].asnumpy(), [
        [0.49986645579338074, -0.9999356865882874, 0.24988877773284912],
        [1.5001286268234253, -0.7501059174537659, 2.000279188156128]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws[1].asnumpy(), [
        0.4452250003814697, -0.9817000031471252, 0.21717499196529388], rtol=1e-5, atol=1e-6)
    lamb = mx.optimizer.LAMB(learning_rate=0.1, wd=0.1)
    ws, _ = _run(lamb, [W0, second], steps, as_list=True)
    np.testing.assert_allclose(ws[0].asnumpy(), [
        [0.06801079213619232, -0.8752619028091431, 0.05123066157102585],
        [1.4412046670913696, -0.6535196900367737, 2.196394205093384]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws[1].asnumpy(), [
        0.29571622610092163, -0.9584143757820129, 0.13304679095745087], rtol=1e-5, atol=1e-6)


def _ftml_numpy(w, grads, lr, beta1=0.6, beta2=0.999, eps=1e-8, wd=0.0, rescale=1.0, clip=None):
    w = w.astype(np.float64)
    d = np.zeros_like(w)
    v = np.zeros_like(w)
    z = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        g = g * rescale + wd * w
        if clip is not None:
            g = np.clip(g, -clip, clip)
        v = beta2 * v + (1 - beta2) * g * g
        d_t = (1 - beta1**t) / lr * (np.sqrt(v / (1 - beta2**t)) + eps)
        z = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d) * w
        d = d_t
        w = -z / d_t
    return w, (d, v, z)


@pytest.mark.parametrize("settings", [{}, {"wd": 0.05, "clip_gradient": 0.4, "rescale_grad": 0.5,
                                           "beta1": 0.7, "beta2": 0.9}])
def test_ftml_follows_its_formula(settings):
    rng = np.random.RandomState(3)
    w0 = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    grads = [rng.uniform(-1, 1, (4, 5)).astype(np.float32) for _ in range(4)]
    opt = mx.optimizer.FTML(learning_rate=0.05, **settings)
    (w,), (state,) = _run(opt, [w0], [[g] for g in grads])
    want, want_state = _ftml_numpy(
        w0, grads, 0.05, beta1=settings.get("beta1", 0.6), beta2=settings.get("beta2", 0.999),
        wd=settings.get("wd", 0.0), rescale=settings.get("rescale_grad", 1.0),
        clip=settings.get("clip_gradient"))
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-4, atol=1e-5)
    for got, exp in zip(state, want_state, strict=True):
        np.testing.assert_allclose(got.asnumpy(), exp, rtol=1e-4, atol=1e-5)


def _lamb_numpy(w, grads, lr, wd=0.0, beta1=0.9, beta2=0.999, eps=1e-6):
    w = w.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        u = (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps) + wd * w
        r1, r2 = np.linalg.norm(w), np.linalg.norm(u)
        w = w - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1.0) * u
    return w


def test_lamb_multi_precision_keeps_training_its_master_copy():
    # Each step starts from the float32 master copy, which each step moves.
    rng = np.random.RandomState(4)
    w0 = rng.uniform(-1, 1, (3, 4)).astype(np.float16)
    grads = [rng.uniform(-1, 1, (3, 4)).astype(np.float16) for _ in range(3)]
    opt = mx.optimizer.LAMB(learning_rate=0.1, wd=0.01, multi_precision=True)
    (w,), (state,) = _run(opt, [w0], [[g] for g in grads])
    master, (mean, var) = state
    assert master.dtype == np.float32 and mean.dtype == np.float32 and w.dtype == np.float16
    want = _lamb_numpy(w0.astype(np.float32), [g.astype(np.float32) for g in grads], 0.1, wd=0.01)
    np.testing.assert_allclose(master.asnumpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.asnumpy(), want.astype(np.float16), rtol=2e-3, atol=2e-3)


def test_lamb_zero_weight_steps_with_plain_rate():
    # A zero norm gives a trust ratio of 1: the step is lr * u.
    opt = mx.optimizer.LAMB(learning_rate=0.5, bias_correction=False, epsilon=0.0)
    (w,), _ = _run(opt, [np.zeros((2, 2), np.float32)], [[np.full((2, 2), 0.3, np.float32)]])
    # mean = 0.1 * g, var = 0.001 * g^2, u = 0.1 / sqrt(0.001) = sqrt(10)
    np.testing.assert_allclose(w.asnumpy(), np.full((2, 2), -0.5 * np.sqrt(10.0)), rtol=1e-5)


def test_lars_skips_bias_and_gives_no_decay_to_non_weights():
    opt = mx.optimizer.LARS(learning_rate=0.1, wd=0.1,
                            param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "bn_gamma"})
    assert opt.wd_mult == {"fc_bias": 0.0, "bn_gamma": 0.0}
    # A bias keeps the plain rate: one SGD step.
    opt = mx.optimizer.LARS(learning_rate=0.1, param_idx2name={0: "fc_bias"})
    ws, _ = _run(opt, [W0[0].copy()], [[GRADS[0][0]]])
    np.testing.assert_allclose(ws[0].asnumpy(), W0[0] - 0.1 * GRADS[0][0], rtol=1e-6)


def test_lbsgd_accumulates_before_stepping():
    opt = mx.optimizer.LBSGD(learning_rate=0.1, batch_scale=2, warmup_epochs=0)
    g = mx.nd.array(GRADS[0])
    w = mx.nd.array(W0)
    opt.update(0, w, g, opt.create_state(0, w))
    np.testing.assert_array_equal(w.asnumpy(), W0)  # the first gradient is only kept
    g[:] = GRADS[1]  # the caller reuses its buffer
    opt.update(0, w, g, None)
    want = W0 - 0.1 * 2 * (GRADS[0] + GRADS[1]) / 2  # the multiplier is batch_scale
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-6)


@pytest.mark.parametrize("name,cls", [("ftml", "FTML"), ("lamb", "LAMB"), ("lars", "LARS"),
                                      ("LBSGD", "LBSGD")])
def test_registered_by_name(name, cls):
    opt = mx.optimizer.create(name, learning_rate=0.2)
    assert type(opt) is getattr(mx.optimizer, cls)
    assert opt.learning_rate == 0.2
    assert cls in mx.optimizer.__all__


def test_defaults_as_mxnet():
    assert mx.optimizer.FTML().lr == 0.01
    assert (mx.optimizer.FTML().beta1, mx.optimizer.FTML().beta2) == (0.6, 0.999)
    lamb = mx.optimizer.LAMB()
    assert (lamb.lr, lamb.epsilon, lamb.bias_correction, lamb.aggregate_num) == (0.001, 1e-6, True, 45)
    lars = mx.optimizer.LARS()
    assert (lars.eta, lars.eps, lars.momentum_correction) == (0.001, 0, True)


@pytest.mark.parametrize("name", ["lamb", "lars", "ftml"])
def test_updater_with_key_lists(name):
    # The updater hands aggregating optimizers lists of keys; one by one gives the same.
    weights = [W0, W0[1].copy()]
    updater = mx.optimizer.get_updater(mx.optimizer.create(name, learning_rate=0.1))
    ws = [mx.nd.array(w) for w in weights]
    updater([0, 1], [mx.nd.array(GRADS[0]), mx.nd.array(GRADS[0][1])], ws)
    single = mx.optimizer.create(name, learning_rate=0.1)
    want, _ = _run(single, weights, [[GRADS[0], GRADS[0][1]]])
    for got, exp in zip(ws, want, strict=True):
        np.testing.assert_allclose(got.asnumpy(), exp.asnumpy(), rtol=1e-6)


# ----------------------------------------------------------------- compare_optimizer


class _PySGD(mx.optimizer.Optimizer):
    """SGD without momentum written with NDArray arithmetic."""

    def create_state(self, index, weight):
        return None

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        weight[:] = (1 - lr * wd) * weight - lr * self.rescale_grad * grad


def test_compare_optimizer_passes_for_equal_updates():
    compare_optimizer(_PySGD(wd=0.1), mx.optimizer.SGD(wd=0.1), (3, 4), np.float32)
    compare_optimizer(_PySGD(), mx.optimizer.SGD(), [(2, 3), (4,)], np.float32, ntensors=2)


def test_compare_optimizer_fails_for_different_updates():
    with pytest.raises(AssertionError):
        compare_optimizer(_PySGD(learning_rate=0.5), mx.optimizer.SGD(), (3, 4), np.float32)


@pytest.mark.parametrize("stypes", [("row_sparse", "default"), ("default", "csr")])
def test_compare_optimizer_sparse_is_a_clear_error(stypes):
    with pytest.raises(MXNetError, match="dense"):
        compare_optimizer(_PySGD(), mx.optimizer.SGD(), (3, 4), np.float32,
                          w_stype=stypes[0], g_stype=stypes[1])


def test_compare_ndarray_tuple_nested_and_none():
    a = (mx.nd.ones((2,)), (mx.nd.zeros((3,)), None))
    compare_ndarray_tuple(a, (mx.nd.ones((2,)), (mx.nd.zeros((3,)), mx.nd.ones((1,)))))
    compare_ndarray_tuple(None, a)
    with pytest.raises(AssertionError):
        compare_ndarray_tuple(a, (mx.nd.ones((2,)) * 2, (mx.nd.zeros((3,)), None)))


def test_float16_without_multi_precision_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mx.optimizer.LARS().create_state_multi_precision(0, mx.nd.ones((2,), dtype="float16"))
    assert any("multi_precision" in str(w.message) for w in caught)

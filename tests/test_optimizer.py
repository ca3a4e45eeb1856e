"""mx.optimizer: updates against MXNet 1.9.1's (fixtures made by
tests/fixtures/optimizer/make_fixtures.py), the Optimizer base class's bookkeeping, the
registry, the Updater and its saved states, and the description given to the core."""

from __future__ import annotations

import json
import pathlib
import pickle
import sys
import warnings

import numpy as np
import pytest
import rsmx as mx
from rsmx.base import MXNetError, MXNetValueError

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "optimizer"
sys.path.insert(0, str(FIXTURES))

import cases  # noqa: E402

EXPECTED = np.load(FIXTURES / "updates.npz")
CASES = {c["id"]: c for c in cases.OPT_CASES}

# The update operators each optimizer needs from the core.
OPS = {
    "sgd": ["sgd_update", "sgd_mom_update", "mp_sgd_update", "mp_sgd_mom_update"],
    "ccsgd": ["sgd_update", "sgd_mom_update"],
    "nag": ["sgd_update", "nag_mom_update", "mp_sgd_update", "mp_nag_mom_update"],
    "adam": ["adam_update"],
    "adagrad": ["_rsmx_adagrad_update"],
    "rmsprop": ["rmsprop_update", "rmspropalex_update"],
    "adadelta": ["_rsmx_adadelta_update"],
    "signum": ["signum_update", "signsgd_update"],
    "ftrl": ["ftrl_update"],
}


def _require_ops(name):
    """Skips a test whose update operators this build of the core does not have yet."""
    missing = [op for op in OPS.get(name.lower(), []) if not hasattr(mx.nd.op, op)]
    if missing:
        pytest.skip(f"this build of the core lacks {missing}")


def _close(got, want, key):
    """Equal within a few units of the dtype's rounding: relative to each value, and
    absolute relative to the array's largest value (for values left by cancellation)."""
    eps = float(np.finfo(want.dtype).eps)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(
        got.astype(np.float64), want.astype(np.float64), rtol=4 * eps, atol=4 * eps * scale,
        err_msg=key,
    )


def _expected(case_id):
    prefix = case_id + "/"
    return {k[len(prefix):]: EXPECTED[k] for k in EXPECTED.files if k.startswith(prefix)}


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        if key in ("lrs", "wds"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-12, err_msg=key)
        elif key == "num_update":
            assert int(got[key]) == int(want[key])
        else:
            assert got[key].dtype == want[key].dtype, key
            _close(got[key], want[key], key)


_CASE_PARAMS = [pytest.param(c, id=c["id"]) for c in cases.OPT_CASES]


@pytest.mark.parametrize("case", _CASE_PARAMS)
def test_updates_match_mxnet(case):
    _require_ops(case["opt"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = cases.run(mx, case)
    _assert_same(got, _expected(case["id"]))


# ------------------------------------------------------------------ Updater states


@pytest.mark.parametrize("dump", [False, True], ids=["states", "states+optimizer"])
@pytest.mark.parametrize(
    "case_id", ["sgd_mom_clip", "adam_cosine", "sgd_fp16_mp_mom", "rmsprop_centered", "nadam"]
)
def test_state_round_trip_continues_identically(case_id, dump):
    case = CASES[case_id]
    _require_ops(case["opt"])
    steps = case.get("steps", 4)
    half = steps // 2
    dtype = case.get("dtype", "float32")
    w0, grads = cases.inputs(case)
    opt = cases.build(mx, case)
    upd = mx.optimizer.get_updater(opt)
    weights = [mx.nd.array(w, dtype=dtype) for w in w0]
    partial = dict(case, steps=half)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases.run(mx, partial, opt=opt, updater=upd, weights=weights)
    blob = upd.get_states(dump_optimizer=dump)
    assert isinstance(blob, bytes)
    loaded = pickle.loads(blob)
    if dump:
        assert isinstance(loaded, tuple) and len(loaded) == 2
        assert type(loaded[1]) is type(opt) and loaded[1].num_update == opt.num_update
        # A fresh optimizer: set_states must bring back the saved one's counts and schedule.
        fresh = cases.build(mx, case)
    else:
        assert isinstance(loaded, dict) and sorted(loaded) == [0, 1]
        # The states alone: the optimizer (with its counts) is the one already in use.
        fresh = opt
    resumed = mx.optimizer.get_updater(fresh)
    resumed.set_states(blob)
    assert resumed.states_synced == {0: False, 1: False}
    assert (resumed.optimizer is not fresh) == dump
    weights = [mx.nd.array(w.asnumpy(), dtype=dtype) for w in weights]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = cases.run(mx, case, updater=resumed, opt=resumed.optimizer,
                        first_step=half, weights=weights)
    assert resumed.states_synced == {0: True, 1: True}
    want = {k: v for k, v in _expected(case_id).items() if k in got}
    _assert_same(got, want)


def test_set_states_without_optimizer_keeps_the_updaters_optimizer():
    opt = mx.optimizer.create("test")
    upd = mx.optimizer.get_updater(opt)
    upd(3, mx.nd.ones((2,)), mx.nd.zeros((2,)))
    other = mx.optimizer.get_updater(mx.optimizer.create("test", rescale_grad=2.0))
    keep = other.optimizer
    other.set_states(upd.get_states())
    assert other.optimizer is keep
    np.testing.assert_array_equal(other.states[3].asnumpy(), [1.0, 1.0])


def test_sync_state_context_moves_nested_states():
    upd = mx.optimizer.get_updater(mx.optimizer.create("test"))
    a, b = mx.nd.ones((2,)), mx.nd.zeros((3,))
    moved = upd.sync_state_context((a, [b, None]), mx.cpu(1))
    assert isinstance(moved, tuple) and isinstance(moved[1], list)
    assert moved[0].context == mx.cpu(1) and moved[1][0].context == mx.cpu(1)
    assert moved[1][1] is None
    assert upd.sync_state_context(None, mx.cpu(1)) is None


def test_updater_moves_loaded_states_to_the_weights_device():
    upd = mx.optimizer.get_updater(mx.optimizer.create("test"))
    upd(0, mx.nd.ones((2,)), mx.nd.zeros((2,)))
    upd2 = mx.optimizer.get_updater(mx.optimizer.create("test"))
    upd2.set_states(upd.get_states())
    w = mx.nd.zeros((2,), ctx=mx.cpu(2))
    upd2(0, mx.nd.ones((2,), ctx=mx.cpu(2)), w)
    assert upd2.states[0].context == mx.cpu(2)
    np.testing.assert_array_equal(upd2.states[0].asnumpy(), [1.0, 1.0])


def test_updater_decodes_byte_keys_and_creates_states_lazily():
    opt = mx.optimizer.create("test")
    upd = mx.optimizer.get_updater(opt)
    assert isinstance(upd, mx.optimizer.Updater) and upd.states == {}
    w = mx.nd.zeros((2,))
    upd(b"fc_weight", mx.nd.ones((2,)), w)
    assert list(upd.states) == ["fc_weight"]
    upd("fc_weight", mx.nd.ones((2,)), w)
    np.testing.assert_array_equal(w.asnumpy(), [2.0, 2.0])


def test_updater_aggregates_sgd_by_dtype():
    calls = []

    class Spy(mx.optimizer.Test):
        aggregate_num = 2

        def update_multi_precision(self, index, weight, grad, state):
            calls.append(index)

    spy = Spy()
    spy.aggregate_num = 2
    upd = mx.optimizer.get_updater(spy)
    assert upd.aggregate_updates
    ws = [mx.nd.zeros((1,), dtype=d) for d in ("float32", "float16", "float32", "float32")]
    with pytest.warns(UserWarning, match="Accumulating with float16"):
        upd([0, 1, 2, 3], [mx.nd.ones((1,), dtype=w.dtype) for w in ws], ws)
    assert calls == [(0, 2), (3,), (1,)]
    assert mx.optimizer.get_updater(mx.optimizer.create("sgd")).aggregate_updates
    assert not mx.optimizer.get_updater(mx.optimizer.create("adam")).aggregate_updates


# ----------------------------------------------------------------- registry, base


def test_create_is_case_insensitive_and_passes_arguments():
    sgd = mx.optimizer.create("SgD", learning_rate=0.3, momentum=0.9)
    assert type(sgd) is mx.optimizer.SGD
    assert (sgd.lr, sgd.momentum) == (0.3, 0.9)
    assert mx.optimizer.Optimizer.create_optimizer("adam").lr == 0.001
    for name in ["sgd", "nag", "adam", "adagrad", "rmsprop", "adadelta", "signum", "ftrl",
                 "ccsgd", "adamax", "nadam", "dcasgd", "sgld", "test", "groupadagrad"]:
        assert name in mx.optimizer.Optimizer.opt_registry


def test_module_paths_as_mxnet():
    assert mx.optimizer.optimizer.SGD is mx.optimizer.SGD
    assert mx.optimizer.optimizer.get_updater is mx.optimizer.get_updater
    assert mx.optimizer.contrib.GroupAdaGrad is mx.optimizer.Optimizer.opt_registry["groupadagrad"]
    assert mx.optimizer.NDabs is mx.nd.abs
    with pytest.raises(AttributeError):
        mx.optimizer.optimizer.NoSuchThing  # noqa: B018


def test_create_unknown_name_raises_value_error():
    with pytest.raises(MXNetValueError, match="Cannot find optimizer nonexistent"):
        mx.optimizer.create("nonexistent")
    with pytest.raises(ValueError):
        mx.optimizer.create("nonexistent")
    with pytest.raises(MXNetError):
        mx.optimizer.create("nonexistent")


def test_register_decorator_and_override_warning():
    @mx.optimizer.Optimizer.register
    class MyRsmxOpt(mx.optimizer.Optimizer):
        pass

    try:
        assert type(mx.optimizer.create("myrsmxopt")) is MyRsmxOpt
        assert type(mx.optimizer.create("MYRSMXOPT")) is MyRsmxOpt
        with pytest.warns(UserWarning, match="is overriding existing optimizer"):

            @mx.optimizer.register
            class myrsmxopt(mx.optimizer.Optimizer):  # noqa: N801
                pass

        assert type(mx.optimizer.create("MyRsmxOpt")) is myrsmxopt
    finally:
        del mx.optimizer.Optimizer.opt_registry["myrsmxopt"]


def test_learning_rate_and_scheduler(capsys):
    opt = mx.optimizer.create("sgd")
    assert opt.learning_rate == 0.01 and opt.lr == 0.01
    opt.set_learning_rate(0.5)
    assert opt.learning_rate == 0.5
    sched = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=0.2)
    opt = mx.optimizer.create("sgd", lr_scheduler=sched)
    assert opt.lr is None and opt.learning_rate == 0.2
    assert capsys.readouterr().out == ""
    with pytest.raises(UserWarning):
        opt.set_learning_rate(0.1)
    opt.num_update = 3
    assert opt.learning_rate == pytest.approx(0.05)
    sched = mx.lr_scheduler.FactorScheduler(step=1, base_lr=0.2)
    mx.optimizer.create("sgd", lr_scheduler=sched, learning_rate=0.7)
    assert sched.base_lr == 0.7
    assert "overwritten by ``learning_rate``" in capsys.readouterr().out
    with pytest.raises(DeprecationWarning):
        opt.set_lr_scale({})


def test_multipliers_from_names_indices_symbol_and_param_dict():
    data = mx.sym.Variable("data")
    w = mx.sym.Variable("fc_weight", lr_mult=2.0)
    b = mx.sym.Variable("fc_bias", wd_mult=0.5)
    net = mx.sym.FullyConnected(data, weight=w, bias=b, num_hidden=3, name="fc")
    names = {0: "fc_weight", 1: "fc_bias", 2: "bn_gamma", 3: "bn_beta", 4: "other"}
    opt = mx.optimizer.create("sgd", learning_rate=0.1, wd=0.01, sym=net, param_idx2name=names)
    assert opt.sym_info[1] == ["data", "fc_weight", "fc_bias"]
    assert opt.lr_mult == {"fc_weight": 2.0}
    assert opt.wd_mult == {"fc_bias": 0.5, "bn_beta": 0.0, "other": 0.0}
    assert [opt._get_lr(i) for i in range(6)] == pytest.approx([0.2, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert [opt._get_wd(i) for i in range(6)] == pytest.approx([0.01, 0.005, 0.01, 0, 0, 0.01])
    opt.set_lr_mult({1: 3.0, "bn_gamma": 0.5})
    assert opt.lr_mult == {"fc_weight": 2.0, 1: 3.0, "bn_gamma": 0.5}
    assert [opt._get_lr(i) for i in range(3)] == pytest.approx([0.2, 0.3, 0.05])
    opt.set_wd_mult({"fc_bias": 4.0, 0: 0.0})
    assert [opt._get_wd(i) for i in range(2)] == pytest.approx([0.0, 0.04])

    class Param:
        lr_mult, wd_mult = 10.0, 20.0

    opt = mx.optimizer.create("sgd", learning_rate=0.1, wd=0.01, param_dict={1: Param()})
    opt.set_lr_mult({1: 3.0})
    assert opt._get_lr(1) == pytest.approx(1.0) and opt._get_wd(1) == pytest.approx(0.2)
    restored = pickle.loads(pickle.dumps(opt))
    assert restored.param_dict == {} and restored._get_lr(1) == pytest.approx(0.3)


def test_update_counts_per_index_and_device():
    opt = mx.optimizer.create("sgd", begin_num_update=5)
    assert opt.num_update == 5
    opt._update_count(0)
    opt._update_count([0, 1])
    assert opt._index_update_count == {0: 7, 1: 6} and opt.num_update == 7
    opt._set_current_context(1)
    opt._update_count(0)
    assert opt._index_update_count == {0: 6} and opt.num_update == 7
    opt._set_current_context(0)
    assert opt._index_update_count == {0: 7, 1: 6}
    assert opt._all_index_update_counts == {0: {0: 7, 1: 6}, 1: {0: 6}}


def test_states_and_multi_precision_layout():
    w32 = mx.nd.ones((2, 3))
    w16 = mx.nd.ones((2, 3), dtype="float16")
    assert mx.optimizer.create("sgd").create_state(0, w32) is None
    mom = mx.optimizer.create("sgd", momentum=0.9).create_state(0, w32)
    assert mom.shape == (2, 3) and mom.dtype == np.float32 and not mom.asnumpy().any()
    mom, master = mx.optimizer.create(
        "nag", momentum=0.9, multi_precision=True
    ).create_state_multi_precision(0, w16)
    assert mom.dtype == np.float32 and master.dtype == np.float32
    np.testing.assert_array_equal(master.asnumpy(), np.ones((2, 3)))
    master, (mean, var) = mx.optimizer.create(
        "adam", multi_precision=True
    ).create_state_multi_precision(0, w16)
    assert master.dtype == mean.dtype == var.dtype == np.float32
    with pytest.warns(UserWarning, match="multi_precision=True option of the SGD optimizer"):
        mx.optimizer.create("sgd", momentum=0.9).create_state_multi_precision(0, w16)
    with pytest.warns(UserWarning, match="multi_precision=True option of the optimizer"):
        mx.optimizer.create("adam").create_state_multi_precision(0, w16)
    with pytest.warns(UserWarning, match="multi_precision=True option of the NAG optimizer"):
        mx.optimizer.create("nag").create_state_multi_precision(0, w16)
    with pytest.warns(UserWarning, match="multi_precision=True option of the SGD optimizer"):
        mx.optimizer.create("ccsgd").create_state_multi_precision(0, w16)
    assert len(mx.optimizer.create("rmsprop").create_state(0, w32)) == 1
    assert len(mx.optimizer.create("rmsprop", centered=True).create_state(0, w32)) == 3
    assert mx.optimizer.create("signum", momentum=0.0).create_state(0, w32) is None
    mom, prev = mx.optimizer.create("dcasgd").create_state(0, w32 * 2)
    assert mom is None and prev.asnumpy().tolist() == [[2.0] * 3] * 2
    with pytest.raises(NotImplementedError):
        mx.optimizer.Optimizer().update(0, w32, w32, None)


def test_adadelta_rescales_the_callers_gradient():
    _require_ops("adadelta")
    opt = mx.optimizer.create("adadelta", rescale_grad=0.5)
    w, g = mx.nd.ones((3,)), mx.nd.full((3,), 4.0)
    opt.update(0, w, g, opt.create_state(0, w))
    np.testing.assert_array_equal(g.asnumpy(), [2.0, 2.0, 2.0])


# ------------------------------------------------------------ description for the core


def test_fused_config_of_sgd_with_everything():
    sched = mx.lr_scheduler.PolyScheduler(max_update=10, base_lr=0.2, pwr=2)

    class Param:
        lr_mult, wd_mult = 4.0, 0.0

    opt = mx.optimizer.create(
        "sgd", momentum=0.9, wd=1e-4, rescale_grad=0.125, lr_scheduler=sched,
        param_idx2name={0: "fc_weight", 1: "fc_bias"}, multi_precision=True,
        begin_num_update=3, param_dict={7: Param()},
    )
    opt.set_lr_mult({"fc_weight": 0.5, 2: 2.0})
    name, cfg = opt._fused_config()
    assert name == "sgd"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cfg.items())
    assert json.loads(cfg["lr_scheduler"]) == json.loads(sched._fused_config())
    assert cfg["learning_rate"] == "None"
    assert (cfg["wd"], cfg["rescale_grad"], cfg["clip_gradient"]) == ("0.0001", "0.125", "-1.0")
    assert (cfg["momentum"], cfg["lazy_update"], cfg["multi_precision"]) == ("0.9", "True", "True")
    assert (cfg["begin_num_update"], cfg["num_update"]) == ("3", "3")
    assert dict(map(tuple, json.loads(cfg["lr_mult"]))) == {"fc_weight": 0.5, 2: 2.0, 7: 4.0}
    assert dict(map(tuple, json.loads(cfg["wd_mult"]))) == {"fc_bias": 0.0, 7: 0.0}
    assert json.loads(cfg["idx2name"]) == [[0, "fc_weight"], [1, "fc_bias"]]


@pytest.mark.parametrize(
    "name, kwargs, expect",
    [
        ("nag", {"momentum": 0.5}, {"momentum": "0.5"}),
        ("ccsgd", {}, {"momentum": "0.0"}),
        ("adam", {"beta1": 0.8}, {"beta1": "0.8", "beta2": "0.999", "epsilon": "1e-08",
                                  "learning_rate": "0.001"}),
        ("adagrad", {"eps": 1e-6}, {"eps": "1e-06", "clip_gradient": "-1.0"}),
        ("adagrad", {"clip_gradient": 0.0}, {"clip_gradient": "0.0"}),
        ("sgd", {"clip_gradient": 0.0}, {"clip_gradient": "-1.0"}),
        ("rmsprop", {"centered": True, "clip_weights": 2.0},
         {"centered": "True", "gamma1": "0.9", "gamma2": "0.9", "clip_weights": "2.0"}),
        ("adadelta", {"rho": 0.5, "clip_gradient": 1.5}, {"rho": "0.5", "epsilon": "1e-05",
                                                           "clip_gradient": "1.5"}),
        ("signum", {"wd_lh": 0.1}, {"momentum": "0.9", "wd_lh": "0.1"}),
        ("ftrl", {"lamda1": 0.2}, {"lamda1": "0.2", "beta": "1", "learning_rate": "0.1"}),
    ],
)
def test_fused_config_per_optimizer(name, kwargs, expect):
    got_name, cfg = mx.optimizer.create(name, **kwargs)._fused_config()
    assert got_name == name
    for k, v in expect.items():
        assert cfg[k] == v, k
    assert cfg["lr_scheduler"] == "None"


def test_no_fused_config_for_what_the_core_cannot_reproduce():
    class MySGD(mx.optimizer.SGD):
        pass

    class MySched(mx.lr_scheduler.LRScheduler):
        def __call__(self, num_update):
            return self.base_lr

    assert MySGD()._fused_config() is None
    assert mx.optimizer.create("sgd", lr_scheduler=MySched())._fused_config() is None
    for name in ["adamax", "nadam", "dcasgd", "sgld", "test", "groupadagrad"]:
        assert mx.optimizer.create(name)._fused_config() is None


def test_sgld_takes_half_a_step_plus_noise_of_variance_lr():
    opt = mx.optimizer.create("sgld", learning_rate=0.04, wd=0.5, rescale_grad=2.0)
    w = mx.nd.ones((200000,))
    opt.update(0, w, mx.nd.full((200000,), 3.0), opt.create_state(0, w))
    change = w.asnumpy().astype(np.float64) - 1.0
    # -lr / 2 * (rescale_grad * grad + wd * weight) = -0.02 * 6.5; noise std sqrt(0.04).
    assert change.mean() == pytest.approx(-0.13, abs=0.003)
    assert change.std() == pytest.approx(0.2, rel=0.02)
    assert opt.num_update == 1


# ------------------------------------------- the core's FusedOptimizer, from the description

_FUSED_CASES = [p for p in _CASE_PARAMS if CASES[p.id]["opt"].lower() in OPS]


@pytest.mark.parametrize("case", _FUSED_CASES)
def test_fused_optimizer_from_description_matches_mxnet(case):
    """The description, given to the core's FusedOptimizer, reproduces MXNet's updates."""
    fused_cls = getattr(mx._core, "FusedOptimizer", None)
    if fused_cls is None:
        pytest.skip("this build of the core has no FusedOptimizer yet")
    _require_ops(case["opt"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        name, params = cases.build(mx, case)._fused_config()
    fused = fused_cls(name, params)
    dtype = case.get("dtype", "float32")
    w0, grads = cases.inputs(case)
    weights = [mx.nd.array(w, dtype=dtype) for w in w0]
    states = [fused.create_state(i, w) for i, w in enumerate(weights)]
    want = _expected(case["id"])
    for step, gs in enumerate(grads):
        for i, g in enumerate(gs):
            fused.update(i, weights[i], mx.nd.array(g, dtype=dtype), states[i])
        for i, w in enumerate(weights):
            _close(w.asnumpy(), want[f"w{i}_step{step}"], f"w{i}_step{step}")
    assert fused.num_update == int(want["num_update"])

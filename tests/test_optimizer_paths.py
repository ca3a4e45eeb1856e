"""The two ways a built-in optimizer runs agree: the Python path (an ``Updater`` over the
Python optimizer) and the core's fused path (``KVStore.set_optimizer``, which binds the
optimizer to the core's ``FusedOptimizer``), step by step, for every optimizer with a
fused path, every built-in schedule, multipliers, rescaling and clipping."""

import json
import pickle

import numpy as np
import pytest
import rsmx as mx

STEPS = 6
SHAPE = (3, 4)
KEYS = (0, 1, 2)
NAMES = {0: "fc_weight", 1: "fc_bias", 2: "bn_gamma"}

# (test id, optimizer name, constructor arguments, weight dtype)
OPTIMIZERS = [
    ("sgd", "sgd", {}, np.float32),
    ("sgd_mom", "sgd", {"momentum": 0.9}, np.float32),
    ("sgd_noagg", "sgd", {"aggregate_num": 0}, np.float32),
    ("sgd_mp_noagg", "sgd", {"aggregate_num": 0, "multi_precision": True}, np.float16),
    ("ccsgd_mom", "ccsgd", {"momentum": 0.5}, np.float32),
    ("sgd_mp", "sgd", {"multi_precision": True}, np.float16),
    ("sgd_mom_mp", "sgd", {"momentum": 0.9, "multi_precision": True}, np.float16),
    ("nag", "nag", {}, np.float32),
    ("nag_mom", "nag", {"momentum": 0.9}, np.float32),
    ("nag_mom_mp", "nag", {"momentum": 0.9, "multi_precision": True}, np.float16),
    ("signum", "signum", {"wd_lh": 0.01}, np.float32),
    ("signsgd", "signum", {"momentum": 0.0}, np.float32),
    ("adam", "adam", {"beta1": 0.8}, np.float32),
    ("adam_mp", "adam", {"multi_precision": True}, np.float16),
    ("adagrad", "adagrad", {"eps": 1e-6}, np.float32),
    ("rmsprop", "rmsprop", {"gamma1": 0.8}, np.float32),
    ("rmsprop_centered", "rmsprop", {"centered": True, "clip_weights": 0.9}, np.float32),
    ("adadelta", "adadelta", {"rho": 0.8}, np.float32),
    ("ftrl", "ftrl", {"lamda1": 0.001}, np.float32),
]

# (test id, scheduler factory or None); warm-up variants cover both warm-up modes.
SCHEDULERS = [
    ("none", None),
    ("factor", lambda: mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=0.05)),
    ("factor_warmup", lambda: mx.lr_scheduler.FactorScheduler(
        step=2, factor=0.5, base_lr=0.05, warmup_steps=2, warmup_begin_lr=0.01)),
    ("multifactor", lambda: mx.lr_scheduler.MultiFactorScheduler(step=[2, 4], factor=0.3, base_lr=0.05)),
    ("multifactor_warmup", lambda: mx.lr_scheduler.MultiFactorScheduler(
        step=[3, 4], factor=0.3, base_lr=0.05, warmup_steps=2, warmup_begin_lr=0.02,
        warmup_mode="constant")),
    ("poly", lambda: mx.lr_scheduler.PolyScheduler(max_update=5, base_lr=0.05, pwr=2, final_lr=0.001)),
    ("poly_warmup", lambda: mx.lr_scheduler.PolyScheduler(
        max_update=5, base_lr=0.05, pwr=3, warmup_steps=2, warmup_begin_lr=0.01)),
    ("cosine", lambda: mx.lr_scheduler.CosineScheduler(max_update=5, base_lr=0.05, final_lr=0.002)),
    ("cosine_warmup", lambda: mx.lr_scheduler.CosineScheduler(
        max_update=5, base_lr=0.05, warmup_steps=2, warmup_begin_lr=0.005, warmup_mode="constant")),
]

# (test id, optimizer arguments, lr multipliers, wd multipliers)
SETTINGS = [
    ("plain", {}, None, None),
    ("mults_rescale_clip",
     {"wd": 0.02, "rescale_grad": 0.5, "clip_gradient": 0.3, "param_idx2name": NAMES},
     {1: 0.5, "bn_gamma": 2.0}, {0: 0.5}),
]


def _make(name, kwargs, sched, settings):
    extra, lr_mult, wd_mult = settings
    params = dict(kwargs, **extra)
    aggregate_num = params.pop("aggregate_num", None)
    if sched is None:
        params["learning_rate"] = 0.05
    else:
        params["lr_scheduler"] = sched()
    opt = mx.optimizer.create(name, **params)
    if aggregate_num is not None:
        opt.aggregate_num = aggregate_num  # as MXNET_OPTIMIZER_AGGREGATION_SIZE sets it
    if lr_mult is not None:
        opt.set_lr_mult(lr_mult)
    if wd_mult is not None:
        opt.set_wd_mult(wd_mult)
    return opt


def _leaves(state):
    if state is None:
        return []
    if isinstance(state, mx.nd.NDArray):
        return [state.asnumpy()]
    return [a for s in state for a in _leaves(s)]


def _keys_at(step):
    # Key 2 is updated every other step, so the keys' counts (and Adam's t) differ.
    return [k for k in KEYS if k != 2 or step % 2 == 0]


def _check_same(py_opt, fused_opt, where):
    assert fused_opt._fused is not None and py_opt._fused is None
    assert fused_opt.num_update == py_opt.num_update, where
    assert fused_opt._all_index_update_counts == py_opt._all_index_update_counts, where
    assert fused_opt._index_update_count == py_opt._index_update_count, where
    assert fused_opt.learning_rate == py_opt.learning_rate, where
    if py_opt.lr_scheduler is not None:
        assert fused_opt.lr_scheduler.base_lr == py_opt.lr_scheduler.base_lr, where


@pytest.mark.parametrize("settings", [s[1:] for s in SETTINGS], ids=[s[0] for s in SETTINGS])
@pytest.mark.parametrize("sched", [s[1] for s in SCHEDULERS], ids=[s[0] for s in SCHEDULERS])
@pytest.mark.parametrize("name,kwargs,dtype", [o[1:] for o in OPTIMIZERS], ids=[o[0] for o in OPTIMIZERS])
def test_python_and_fused_paths_agree(name, kwargs, dtype, sched, settings):
    rng = np.random.default_rng(11)
    init = {k: rng.standard_normal(SHAPE).astype(dtype) for k in KEYS}
    grads = [{k: rng.standard_normal(SHAPE).astype(dtype) for k in KEYS} for _ in range(STEPS)]

    py_opt = _make(name, kwargs, sched, settings)
    updater = mx.optimizer.get_updater(py_opt)
    weights = {k: mx.nd.array(v, dtype=dtype) for k, v in init.items()}

    fused_opt = _make(name, kwargs, sched, settings)
    kv = mx.kv.create("local")
    kv.init(list(KEYS), [mx.nd.array(init[k], dtype=dtype) for k in KEYS])
    kv.set_optimizer(fused_opt)
    assert type(kv._state_keeper).__name__ == "FusedUpdater"

    for step in range(STEPS):
        keys = _keys_at(step)
        for k in keys:
            updater(k, mx.nd.array(grads[step][k], dtype=dtype), weights[k])
        kv.push(keys, [mx.nd.array(grads[step][k], dtype=dtype) for k in keys])
        outs = [mx.nd.zeros(SHAPE, dtype=dtype) for _ in KEYS]
        kv.pull(list(KEYS), out=outs)
        where = f"step {step}"
        for k, out in zip(KEYS, outs, strict=True):
            np.testing.assert_array_equal(out.asnumpy(), weights[k].asnumpy(), err_msg=f"{where}, weight {k}")
        fused_states = pickle.loads(kv._updater_states(False))
        assert sorted(fused_states) == sorted(updater.states), where
        for k, state in updater.states.items():
            want, got = _leaves(state), _leaves(fused_states[k])
            assert len(want) == len(got), f"{where}, state of {k}"
            for w, g in zip(want, got, strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"{where}, state of {k}")
        _check_same(py_opt, fused_opt, where)


# ---------------------------------------------------- a bound optimizer reads the core


def _bound_sgd(**kwargs):
    opt = mx.optimizer.create("sgd", learning_rate=0.1, **kwargs)
    kv = mx.kv.create("local")
    kv.init(0, mx.nd.ones(SHAPE))
    kv.set_optimizer(opt)
    return opt, kv


def test_bound_optimizer_state_lives_in_the_core():
    sched = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=0.1)
    opt, kv = _bound_sgd(lr_scheduler=sched)
    fused = opt._fused
    for _ in range(3):
        kv.push(0, mx.nd.ones(SHAPE))
    # No copies: the Python attributes are the core's values.
    assert "num_update" not in opt.__dict__ and "base_lr" not in sched.__dict__
    assert opt.num_update == fused.num_update == 3
    assert opt._index_update_count == {0: 3}
    assert sched.base_lr == json_base_lr(fused) == 0.1 * 0.5**2
    assert opt.learning_rate == fused.learning_rate
    # Writes go to the core too.
    opt.num_update = 7
    assert fused.num_update == 7
    sched.base_lr = 0.01
    assert json_base_lr(fused) == 0.01
    opt.rescale_grad = 0.25
    assert fused.rescale_grad == 0.25
    with pytest.raises(mx.base.MXNetError):
        opt.lr_scheduler = None


def json_base_lr(fused):
    return json.loads(fused.lr_scheduler_state())["base_lr"]


def test_settings_changed_after_binding_reach_the_core():
    opt, kv = _bound_sgd()
    opt.set_lr_mult({0: 0.5})
    opt.wd = 0.1
    kv.push(0, mx.nd.ones(SHAPE))
    out = mx.nd.zeros(SHAPE)
    kv.pull(0, out=out)
    # _rsmx_agg_sgd_update: w - lr * (g + wd * w) with lr = 0.1 * 0.5.
    np.testing.assert_allclose(out.asnumpy(), 1 - 0.05 * (1 + 0.1), rtol=1e-6)
    opt.set_learning_rate(0.2)
    assert opt._fused.lr == 0.2 and opt.lr == 0.2


def test_python_updates_of_a_bound_optimizer_count_in_the_core():
    opt, kv = _bound_sgd(momentum=0.9)
    kv.push(0, mx.nd.ones(SHAPE))
    updater = mx.optimizer.get_updater(opt)
    updater(0, mx.nd.ones(SHAPE), mx.nd.ones(SHAPE))
    assert opt._fused.get_counts() == {0: {0: 2}} and opt.num_update == 2


def test_pickled_bound_optimizer_is_an_unbound_snapshot():
    sched = mx.lr_scheduler.MultiFactorScheduler(step=[1, 2], factor=0.5, base_lr=0.1)
    opt, kv = _bound_sgd(lr_scheduler=sched)
    for _ in range(3):
        kv.push(0, mx.nd.ones(SHAPE))
    copy = pickle.loads(pickle.dumps(opt))
    assert copy._fused is None and copy.lr_scheduler._fused is None
    assert copy.num_update == 3 and copy._all_index_update_counts == {0: {0: 3}}
    assert copy._index_update_count is copy._all_index_update_counts[0]
    assert copy.lr_scheduler.cur_step_ind == 2 and copy.lr_scheduler.base_lr == 0.1 * 0.25
    # The copy counts on its own, in Python.
    copy._update_count(0)
    assert copy.num_update == 4 and opt.num_update == 3


def test_one_optimizer_on_two_stores_shares_one_core_optimizer():
    opt, kv = _bound_sgd()
    other = mx.kv.create("local")
    other.init(0, mx.nd.ones(SHAPE))
    other.set_optimizer(opt)
    kv.push(0, mx.nd.ones(SHAPE))
    other.push(0, mx.nd.ones(SHAPE))
    assert opt.num_update == 2

"""A worker (of one) sending bad input: each call fails with a clear MXNetError and the
servers' values stay as they were. Prints ``BAD INPUT PASSED``."""

from __future__ import annotations

import pickle

import numpy as np
import rsmx as mx
from rsmx.base import MXNetError

kv = mx.kv.create("dist_sync")
kv.init(3, mx.nd.ones((4,)))
out = mx.nd.zeros((4,))


def refused(call, *words: str) -> None:
    try:
        call()
        mx.nd.waitall()
    except MXNetError as e:
        for w in words:
            assert w in str(e), f"{w!r} not in {e}"
    else:
        raise AssertionError(f"no error for {words}")
    kv.pull(3, out=out)
    assert np.allclose(out.asnumpy(), 1), out.asnumpy()


refused(lambda: kv.push(9, mx.nd.ones((4,))), "9")  # a key pushed before init
refused(lambda: kv.pull(9, out=out), "9")
refused(lambda: kv.push(3, mx.nd.ones((5,))), "(5,)")  # shape
refused(lambda: kv.push(3, mx.nd.ones((4,), dtype="float64")), "float64")  # dtype
refused(lambda: kv._send_command_to_servers(42, ""), "command 42")  # an unknown command
not_an_optimizer = pickle.dumps({"lr": 0.1}, 0)
refused(lambda: kv._send_command_to_servers(0, not_an_optimizer), "not an optimizer")
evil = b"cos\nsystem\n(S'echo pwned'\ntR."
refused(lambda: kv._send_command_to_servers(0, evil), "os.system", "not loaded")
refused(lambda: kv.set_optimizer("sgd"), "expected an rsmx.optimizer.Optimizer")
refused(lambda: kv.init("name", mx.nd.ones((4,))), "int keys or str keys")
refused(lambda: kv.save_optimizer_states("x"), "distributed")
refused(lambda: kv._set_updater(lambda k, g, w: None), "servers")
print("BAD INPUT PASSED", flush=True)

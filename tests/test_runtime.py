"""mx.runtime.Features and the small names of mx.base."""

from __future__ import annotations

import os

import numpy as np
import pytest
import rsmx as mx
from rsmx.runtime import Features


def test_features_use_mxnets_names_and_say_what_rsmx_has():
    f = Features()
    assert f is Features() and len(f) == 32 and list(f)[:2] == ["CUDA", "CUDNN"]
    assert f.is_enabled("dist_kvstore") and f.is_enabled("PROFILER")
    assert not f.is_enabled("MKLDNN") and not f.is_enabled("OPENCV")
    assert f.is_enabled("CPU_SSE2")  # every x86-64 CPU has it
    assert all(f.is_enabled(name) == feat.enabled for name, feat in f.items())
    assert "✔ PROFILER" in repr(f) and "✖ CUDNN" in repr(f)
    with pytest.raises(RuntimeError, match="unknown"):
        f.is_enabled("this girl is on fire")


def test_base_names():
    assert mx.base.mx_real_t is np.float32
    old = os.environ.pop("MXNET_HOME", None)
    try:
        assert mx.base.data_dir() == os.path.join(os.path.expanduser("~"), ".mxnet")
        os.environ["MXNET_HOME"] = "/tmp/somewhere"
        assert mx.base.data_dir() == "/tmp/somewhere"
    finally:
        os.environ.pop("MXNET_HOME", None)
        if old is not None:
            os.environ["MXNET_HOME"] = old

"""mx.profiler: engine operators, memory and the user's tasks, frames, events, counters and
markers, written as a Chrome trace and as MXNet's aggregate statistics."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import rsmx as mx
from rsmx import profiler


@pytest.fixture
def trace(tmp_path):
    """A running profiler with statistics, writing to a fresh file; stopped afterwards."""
    path = tmp_path / "profile.json"
    profiler.set_config(profile_all=True, aggregate_stats=True, filename=str(path))
    mx.nd.waitall()
    profiler.dumps(reset=True)
    profiler.set_state("run")
    yield path
    profiler.set_state("stop")
    profiler.dumps(reset=True)
    profiler.set_config(profile_all=False, aggregate_stats=False, filename="profile.json")


def stats() -> dict:
    return json.loads(profiler.dumps(format="json"))


def events(path) -> list[dict]:
    with open(path) as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] == "ms"
    return doc["traceEvents"]


def test_imperative_operators_are_counted_by_name(trace):
    x = mx.nd.zeros((100, 100))
    y = mx.nd.sqrt(x)
    x = x + 1
    x = x + 1
    mx.nd.waitall()
    ops = stats()["Time"]["operator"]
    assert ops["sqrt"]["Count"] == 1
    assert ops["_plus_scalar"]["Count"] == 2
    entry = ops["_plus_scalar"]
    assert entry["Min"] <= entry["Avg"] <= entry["Max"]
    assert entry["Total"] == pytest.approx(entry["Avg"] * 2)
    del y


def test_executor_operators_appear_in_the_trace_on_their_device(trace):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=4, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    ex = net.simple_bind(mx.cpu(), data=(2, 3))
    for _ in range(3):
        ex.forward(is_train=False)
    ex.outputs[0].wait_to_read()
    profiler.dump(False)
    evs = events(trace)
    rows = {e["pid"]: e["args"]["name"] for e in evs if e["ph"] == "M"}
    fc = [e for e in evs if e["name"] == "FullyConnected"]
    assert [e["ph"] for e in fc] == ["B", "E"] * 3
    assert all(rows[e["pid"]] == "cpu/0" and e["cat"] == "operator" for e in fc)
    assert all(b["ts"] <= e["ts"] for b, e in zip(fc[::2], fc[1::2], strict=True))
    assert stats()["Time"]["operator"]["Activation"]["Count"] == 3


def test_nothing_is_recorded_while_paused_or_stopped(trace):
    profiler.pause()
    mx.nd.sqrt(mx.nd.ones((4,))).wait_to_read()
    profiler.resume()
    mx.nd.exp(mx.nd.ones((4,))).wait_to_read()
    profiler.set_state("stop")
    mx.nd.log(mx.nd.ones((4,))).wait_to_read()
    ops = stats()["Time"]["operator"]
    assert "exp" in ops and "sqrt" not in ops and "log" not in ops


def test_user_objects_are_traced_and_aggregated(trace):
    domain = profiler.Domain("PyDomain")
    task = domain.new_task("load")
    task.start()
    mx.nd.ones((10, 10)).asnumpy()
    task.stop()
    with profiler.Frame(domain, "frame"):
        pass
    event = profiler.Event("step")
    event.start()
    event.stop()
    counter = domain.new_counter("items", 5)
    counter += 2
    counter -= 1
    profiler.Marker(domain, "here").mark("process")
    profiler.dump(False)
    evs = events(trace)
    assert [e["ph"] for e in evs if e["name"] == "load"] == ["b", "e"]
    assert [e["ph"] for e in evs if e["name"] == "step"] == ["B", "E"]
    assert [e["args"]["items"] for e in evs if e["name"] == "items"] == [5, 7, 6]
    marker = [e for e in evs if e["name"] == "here"]
    assert len(marker) == 1 and marker[0]["s"] == "p"
    time = stats()["Time"]
    assert time["PyDomain"]["load"]["Count"] == 1
    assert time["PyDomain"]["frame"]["Count"] == 1
    assert time["event"]["step"]["Count"] == 1
    assert time["PyDomain"]["items"]["Max"] == 7
    assert "here" in time["PyDomain,instant_marker"]
    table = profiler.dumps()
    assert "Profile Statistics" in table and "PyDomain\n=================" in table


def test_memory_use_is_recorded_per_device(trace):
    a = mx.nd.ones((256, 256))
    b = a * 2
    b.wait_to_read()
    del a, b
    mx.nd.waitall()
    mem = stats()["Memory"]["Device Storage"]["Memory: cpu/0"]
    assert mem["Count"] >= 2 and mem["Max"] >= 256 * 256 * 4 / 1000


def test_sorting_and_reset(trace):
    for n in (1, 2, 3):
        for _ in range(n):
            mx.nd.ones((8,))
    mx.nd.sqrt(mx.nd.ones((8,)))
    mx.nd.waitall()
    for key, field in [("count", "Count"), ("total", "Total"), ("max", "Max"), ("min", "Min"), ("avg", "Avg")]:
        for ascending in (False, True):
            doc = json.loads(profiler.dumps(format="json", sort_by=key, ascending=ascending))
            values = [v[field] for v in doc["Time"]["operator"].values()]
            assert values == sorted(values, reverse=not ascending), (key, ascending)
    profiler.dumps(reset=True)
    assert stats()["Time"] == {}
    mx.nd.sqrt(mx.nd.ones((8,))).wait_to_read()
    assert stats()["Time"]["operator"]["sqrt"]["Count"] == 1


def test_continuous_dumps_grow_the_file(trace):
    sizes = []
    for _ in range(3):
        mx.nd.ones((8,)).wait_to_read()
        profiler.dump(False)
        sizes.append(trace.stat().st_size)
    assert sizes == sorted(sizes) and sizes[0] > 0


def test_bad_settings_raise_mxnet_errors(trace):
    with pytest.raises(mx.MXNetError, match="profile_everything"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(mx.MXNetError, match="aggregate_stats"):
        profiler.set_config(aggregate_stats="sometimes")
    with pytest.raises(mx.MXNetError, match="format"):
        profiler.dumps(format="xml")
    with pytest.raises(mx.MXNetError, match="sort_by"):
        profiler.dumps(sort_by="median")
    with pytest.raises(mx.MXNetError, match="state"):
        profiler.set_state("go")
    with pytest.raises(mx.MXNetError, match="scope"):
        profiler.Marker(profiler.Domain("d"), "m").mark("galaxy")
    with pytest.raises(mx.MXNetError, match="KVStore"):
        profiler.set_state("run", profile_process="server")
    with pytest.raises(mx.MXNetError, match="without being started"):
        profiler.Event("never").stop()
    # The settings that were valid still hold.
    mx.nd.sqrt(mx.nd.ones((4,))).wait_to_read()
    assert stats()["Time"]["operator"]["sqrt"]["Count"] == 1


def test_dump_before_any_run_says_so(tmp_path):
    code = (
        "import rsmx as mx\n"
        f"mx.profiler.set_config(filename={str(tmp_path / 'p.json')!r})\n"
        "try:\n"
        "    mx.profiler.dump()\n"
        "except mx.MXNetError as e:\n"
        "    print('error:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "hasn't been run" in out.stdout, out.stdout + out.stderr
    assert not (tmp_path / "p.json").exists()


def test_an_error_leaves_the_profiler_recording(trace):
    bad = mx.nd.array(np.ones((2, 3)))
    with pytest.raises(mx.MXNetError):
        mx.nd.dot(bad, bad).wait_to_read()
    mx.nd.sqrt(bad).wait_to_read()
    assert stats()["Time"]["operator"]["sqrt"]["Count"] == 1

"""The Python boundary: every function of the extension runs in the one wrapper that
turns panics into MXNetError, and core errors carry their context as attributes."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
import rsmx as mx

SRC = pathlib.Path(__file__).resolve().parent.parent / "src" / "py"
FN = re.compile(r"\bfn\s+(\$?\w+)")


def _block(text: str, open_at: int) -> tuple[int, int]:
    """The span of the brace block opening at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return open_at, i + 1
    raise AssertionError("unbalanced braces")


def _fn_body(text: str, start: int) -> tuple[str, str, int]:
    """Name and body of the first `fn` at or after `start`, and where it ends."""
    m = FN.search(text, start)
    assert m, "no fn after an attribute"
    depth, i = 0, m.end()
    # The body opens at the first `{` outside the signature's parentheses and generics.
    while True:
        c = text[i]
        if c in "(<[":
            depth += 1
        elif c in ")>]" and not (c == ">" and text[i - 1] == "-"):
            depth -= 1
        elif c == "{" and depth == 0:
            break
        i += 1
    a, b = _block(text, i)
    return m.group(1), text[a:b], b


def python_facing_functions() -> list[tuple[str, str]]:
    out = []
    for path in sorted(SRC.glob("*.rs")):
        text = path.read_text()
        for m in re.finditer(r"#\[pyfunction\]", text):
            name, body, _ = _fn_body(text, m.end())
            out.append((f"{path.name}:{name}", body))
        for m in re.finditer(r"#\[pymethods\]\s*impl\s+\w+\s*", text):
            a, b = _block(text, m.end())
            pos = a + 1
            while (f := FN.search(text, pos)) and f.start() < b:
                name, body, pos = _fn_body(text, f.start())
                out.append((f"{path.name}:{name}", body))
    return out


def test_every_python_facing_function_runs_in_the_guard():
    functions = python_facing_functions()
    assert len(functions) > 100
    unguarded = [n for n, body in functions if not re.search(r"\bguard(_detached)?\(", body)]
    assert not unguarded, f"functions without guard: {unguarded}"


def test_operator_errors_carry_the_operator(ctx):
    a = mx.nd.ones((2, 3), ctx=ctx)
    b = mx.nd.ones((4, 5), ctx=ctx)
    with pytest.raises(mx.MXNetError) as info:
        mx.nd.dot(a, b).asnumpy()
    assert info.value.op == "dot"
    assert info.value.node is None
    assert info.value.peer is None and info.value.cuda_call is None


def test_graph_errors_carry_operator_and_node(ctx):
    x = mx.sym.Variable("x")
    y = mx.sym.FullyConnected(x, num_hidden=4, name="fc1")
    with pytest.raises(mx.MXNetError) as info:
        y.infer_shape(x=(2, 3), fc1_weight=(5, 7))
    assert info.value.op == "FullyConnected"
    assert info.value.node == "fc1"
    assert "fc1" in str(info.value)


def test_an_error_in_an_async_op_names_it_at_the_wait(ctx):
    x = mx.nd.array(np.zeros((2, 2)), ctx=ctx)
    with pytest.raises(mx.MXNetError) as info:
        mx.nd.reshape(x, shape=(3, 3)).wait_to_read()
    assert info.value.op == "Reshape"


def test_arrays_from_the_core_are_of_the_python_class(ctx):
    from rsmx import _core

    a = mx.nd.ones((2, 3), ctx=ctx)
    made = [a, a + 1, 2 * a, a[0], a[0:1], a.reshape((3, 2)), mx.nd.array([1.0], ctx=ctx)]
    made += mx.nd.split(a, num_outputs=3, axis=1)
    assert all(type(x) is mx.nd.NDArray for x in made)
    assert issubclass(mx.nd.NDArray, _core.NDArrayBase)
    # The core class holds only what the core defines; MXNet's Python methods live on
    # the subclass.
    assert not hasattr(_core.NDArrayBase, "asnumpy")
    assert "asnumpy" in vars(mx.nd.NDArray)


def test_only_a_subclass_of_the_core_class_can_be_the_array_class():
    from rsmx import _core

    with pytest.raises(mx.MXNetError, match="subclass of NDArrayBase"):
        _core._set_array_class(dict)

"""What the GPU path must never do in an op, checked in the sources: synchronise the
whole device, copy or fill synchronously, use the legacy NULL stream, or free device
memory (``cuMemFree`` synchronises the device) anywhere but the pool's release path."""

from __future__ import annotations

import re
from pathlib import Path

from rsmx import _core

SRC = Path(__file__).resolve().parent.parent / "src"
# The fake driver implements the calls; the table declares them.
EXEMPT = {"cuda/fake.rs", "cuda/driver.rs"}


def sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text() for p in SRC.rglob("*.rs")
            if str(p.relative_to(SRC)) not in EXEMPT and "/fake/" not in str(p)}


def test_the_driver_table_has_no_device_wide_or_synchronous_calls():
    symbols = _core.cuda_driver_symbols()
    assert "cuCtxSynchronize" not in symbols
    for s in symbols:
        if "Memcpy" in s or "Memset" in s:
            assert "Async" in s, s


def test_device_memory_is_freed_only_by_the_pool():
    users = [f for f, text in sources().items() if re.search(r"\bmem_free\s*\(", text)]
    assert users == ["storage/gpu.rs"]


def call_at(text: str, start: int) -> str:
    """The call starting at ``start``, up to its closing parenthesis."""
    depth, i = 0, text.index("(", start)
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return text[start:j + 1]
    return text[start:]


def test_every_enqueue_names_a_stream():
    calls = r"(memcpy_\w+_async|memset_\w+_async|launch_kernel|stream_wait_event|event_record)\s*\("
    seen = 0
    for f, text in sources().items():
        for m in re.finditer(calls, text):
            call = call_at(text, m.start())
            # Streams reach the driver only as a `StreamHandle`, which is never null.
            assert "as_raw()" in call, (f, call)
            seen += 1
    assert seen >= 8

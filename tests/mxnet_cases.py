"""Loads the MXNet-made fixtures of the operator tests: an ``.npz`` holding a JSON list of
cases (under ``meta``) and each case's arrays under ``c<i>_<name>``."""

from __future__ import annotations

import json

import numpy as np


def load_cases(path: str) -> list[tuple[str, dict]]:
    """Each case as ``(test id, case)``: its JSON fields, ``inputs`` (the arrays
    ``in0, in1, ...``), ``after`` (``after0, ...``) and ``out`` where stored; the id is
    ``<op>-<first input's dtype>-<index>``."""
    data = np.load(path)
    out = []
    for i, c in enumerate(json.loads(str(data["meta"]))):
        c = dict(c)
        prefix = f"c{i}_"
        stored = {k[len(prefix):]: data[k] for k in data.files if k.startswith(prefix)}
        c["inputs"] = [stored[f"in{j}"] for j in range(c["n"])]
        if "after0" in stored:
            c["after"] = [stored[f"after{j}"] for j in range(c["n"])]
        if "out" in stored:
            c["out"] = stored["out"]
        out.append((f"{c['op']}-{c['inputs'][0].dtype.name}-{i}", c))
    return out

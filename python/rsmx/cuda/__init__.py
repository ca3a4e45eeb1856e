"""CUDA support: finding the driver, NVRTC and the CUDA libraries, the compatibility
policy, compiling rsmx's kernels with NVRTC into an on-disk cache, and starting the core's
GPU backend with them (or the fake GPU, ``RSMX_FAKE_GPU=N``).

Nothing here is imported by ``import rsmx``, only when GPUs are first counted or a GPU
context is made; ``python -m rsmx.cuda`` prints what was found and why a GPU is unusable
if it is.
"""

from __future__ import annotations

from .discover import Report, find
from .policy import Incompatible, Plan, plan, version_str
from .start import stats

__all__ = ["Incompatible", "Plan", "Report", "diagnose", "find", "plan", "stats"]


def diagnose() -> str:
    """What was found, one line a part, ending with the usable devices or the reason
    there are none."""
    r = find()

    def line(part: str, value: str | None) -> str:
        shown = value if value is not None else "missing: " + r.missing.get(part, "?")
        return f"{part:<9}{shown}"

    archs = ", ".join(f"sm_{a}" for a in r.nvrtc_archs)
    lines = [
        line("bindings", r.bindings),
        line("driver", None if r.driver is None else f"CUDA {version_str(r.driver)}"),
        line("nvrtc", None if r.nvrtc is None else f"{version_str(r.nvrtc)} ({archs})"),
        line("cublas", r.cublas),
        line("cudnn", r.cudnn),
    ]
    for d in r.devices:
        build = f"{d.plan.kind} {d.plan.arch}" if d.plan else f"unusable: {d.problem}"
        lines.append(
            f"gpu({d.ordinal})   {d.name}, compute {d.cc[0]}.{d.cc[1]}, {d.sm_count} SMs: {build}"
        )
    usable = len(r.usable)
    lines.append(f"usable GPUs: {usable}" + ("" if usable else f" ({r.why_unusable()})"))
    return "\n".join(lines)

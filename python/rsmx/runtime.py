"""``mx.runtime``: which of MXNet's build features this rsmx has (``Features``), under
MXNet's feature names.

rsmx decides some things at run time that MXNet fixed at build time: the ``CPU_*`` and
``F16C`` entries say what this CPU offers (rsmx's kernels pick AVX2 or AVX-512 when they
run), and ``CUDA`` says that the CUDA backend is built in (it still needs a GPU and
NVIDIA's libraries to start)."""

from __future__ import annotations

import collections

__all__ = ["Feature", "Features", "feature_list"]

# What rsmx is built with, by MXNet's names, in MXNet's order; None: a CPU flag.
_BUILT: list[tuple[str, bool | None]] = [
    ("CUDA", True),
    ("CUDNN", False),
    ("NCCL", False),
    ("CUDA_RTC", True),
    ("TENSORRT", False),
    ("CPU_SSE", None),
    ("CPU_SSE2", None),
    ("CPU_SSE3", None),
    ("CPU_SSE4_1", None),
    ("CPU_SSE4_2", None),
    ("CPU_SSE4A", None),
    ("CPU_AVX", None),
    ("CPU_AVX2", None),
    ("OPENMP", False),
    ("SSE", True),
    ("F16C", None),
    ("JEMALLOC", False),
    ("BLAS_OPEN", False),
    ("BLAS_ATLAS", False),
    ("BLAS_MKL", False),
    ("BLAS_APPLE", False),
    ("LAPACK", False),
    ("MKLDNN", False),
    ("OPENCV", False),
    ("CAFFE", False),
    ("PROFILER", True),
    ("DIST_KVSTORE", True),
    ("CXX14", False),
    ("INT64_TENSOR_SIZE", True),
    ("SIGNAL_HANDLER", False),
    ("DEBUG", False),
    ("TVM_OP", False),
]

# /proc/cpuinfo's name of each CPU flag.
_CPU_FLAGS = {
    "CPU_SSE": "sse",
    "CPU_SSE2": "sse2",
    "CPU_SSE3": "pni",
    "CPU_SSE4_1": "sse4_1",
    "CPU_SSE4_2": "sse4_2",
    "CPU_SSE4A": "sse4a",
    "CPU_AVX": "avx",
    "CPU_AVX2": "avx2",
    "F16C": "f16c",
}


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


class Feature:
    """A build feature: its ``name`` and whether it is ``enabled``."""

    __slots__ = ("name", "enabled")

    def __init__(self, name: str, enabled: bool):
        self.name = name
        self.enabled = enabled

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def feature_list() -> list[Feature]:
    """Every feature, in MXNet's order."""
    flags = _cpu_flags()
    return [Feature(name, _CPU_FLAGS[name] in flags if on is None else on) for name, on in _BUILT]


class Features(collections.OrderedDict):
    """The features by name; one shared instance."""

    instance: Features | None = None

    def __new__(cls) -> Features:
        if cls.instance is None:
            cls.instance = super().__new__(cls)
            collections.OrderedDict.__init__(cls.instance, [(f.name, f) for f in feature_list()])
        return cls.instance

    def __init__(self) -> None:
        pass

    def __repr__(self) -> str:
        return str(list(self.values()))

    def is_enabled(self, feature_name: str) -> bool:
        """Whether the feature is on; ``RuntimeError`` for a name that is not a feature."""
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(f"Feature '{name}' is unknown, known features are: {list(self.keys())}")
        return self[name].enabled

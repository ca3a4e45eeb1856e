"""Building rsmx's CUDA kernel modules as host shared libraries, for the fake GPU and the kernel tests."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

#: The emulation header every host build is compiled with (``-include``).
HEADER = Path(__file__).resolve().parent / "host" / "cuda_host.h"
COMPILER = "g++"
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-include", "cuda_host.h")
#: Changes whenever what a library holds changes other than through the key's other parts.
SCHEMA = "rsmx-cuda-host-1"

#: The kernel table: a ``rsmx_host::Kernel`` per kernel and the two exported functions.
TABLE = """#include "{source}"
namespace {{
rsmx_host::Kernel rsmx_host_kernels[] = {{
{entries}  {{nullptr, nullptr, nullptr, {{0}}}},
}};
constexpr std::size_t rsmx_host_count = sizeof rsmx_host_kernels / sizeof *rsmx_host_kernels;
}}  // namespace
extern "C" int rsmx_host_launch(const char* name, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, std::size_t smem,
                                void** params, int order, unsigned seed) {{
  return rsmx_host::launch_named(rsmx_host_kernels, rsmx_host_count, name, dim3(gx, gy, gz),
                                 dim3(bx, by, bz), smem, params, order, seed);
}}
extern "C" int rsmx_host_param_sizes(const char* name, std::size_t* sizes, int max) {{
  return rsmx_host::param_sizes_named(rsmx_host_kernels, rsmx_host_count, name, sizes, max);
}}
"""
ENTRY = """  {{"{k}", [](void** p) {{ rsmx_host::call_with({k}, p); }},
   [](std::size_t* s, int max) {{ return rsmx_host::param_sizes({k}, s, max); }}, {{0}}}},
"""
KERNEL = re.compile(r'extern "C" __attribute__\(\(used\)\) void (\w+)\s*\(')


class BuildError(RuntimeError):
    """g++ refused a module; the message holds its output."""


def _run(cmd: list[str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout


@functools.lru_cache(maxsize=1)
def compiler_identity() -> str:
    """``g++ --version``: a different compiler may build different code."""
    return _run([COMPILER, "--version"])


def _write_sources(name: str, source: str, headers: dict[str, str], workdir: Path) -> Path:
    for hname, text in headers.items():
        (workdir / hname).write_text(text)
    cu = workdir / f"{name}.cu"
    cu.write_text(source)
    return cu


def _include_flags(workdir: Path) -> list[str]:
    return [f"-I{workdir}", f"-I{HEADER.parent}"]


def _kernels_in(cu: Path, workdir: Path) -> list[str]:
    pre = _run([COMPILER, "-std=c++17", *_include_flags(workdir), "-include", "cuda_host.h",
                "-x", "c++", "-E", str(cu)])
    return KERNEL.findall(pre)


def kernel_names(name: str, source: str, headers: dict[str, str]) -> list[str]:
    """The ``extern "C"`` kernels module ``name`` defines, in source order."""
    with tempfile.TemporaryDirectory(prefix="rsmx-host-") as d:
        return _kernels_in(_write_sources(name, source, headers, Path(d)), Path(d))


def build_module(name: str, source: str, headers: dict[str, str], out_dir: Path | str,
                 filename: str | None = None) -> Path:
    """Compiles module ``name`` and its kernel table into ``out_dir/filename`` (default
    ``<name>.so``), written under a temporary name and then renamed into place."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / (filename or f"{name}.so")
    with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as d:
        workdir = Path(d)
        cu = _write_sources(name, source, headers, workdir)
        entries = "".join(ENTRY.format(k=k) for k in _kernels_in(cu, workdir))
        table = workdir / f"{name}_host.cpp"
        table.write_text(TABLE.format(source=cu.name, entries=entries))
        lib = workdir / "lib.so"
        _run([COMPILER, *FLAGS, *_include_flags(workdir), "-o", str(lib), str(table)])
        os.replace(lib, target)
    return target


def key(source: str, headers: dict[str, str]) -> str:
    """The cache name of one module's library: a SHA-256 over its source, every header,
    the emulation header, the table, the compiler flags and ``g++ --version``."""
    h = hashlib.sha256()
    parts = (SCHEMA, source, *sorted(f"{n}\0{t}" for n, t in headers.items()),
             HEADER.read_text(), TABLE, ENTRY, "\0".join(FLAGS), compiler_identity())
    for part in parts:
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()


def default_dir() -> Path:
    """``$RSMX_CUDA_CACHE_DIR/host``, else ``$XDG_CACHE_HOME/rsmx/cuda/host``, else
    ``~/.cache/rsmx/cuda/host``."""
    from .cache import default_dir as cuda_dir

    return cuda_dir() / "host"


def build_all(cache_dir: Path | str | None = None) -> dict[str, Path]:
    """Every embedded module's host library, by module name. Libraries are kept under
    ``cache_dir`` (default :func:`default_dir`) by :func:`key`, so a later call, in this
    process or another, compiles nothing; ``RSMX_CUDA_CACHE=0`` builds them afresh in a
    new temporary directory instead."""
    from .build import sources

    headers, modules = sources()
    if os.environ.get("RSMX_CUDA_CACHE", "1") == "0":
        directory, cached = Path(tempfile.mkdtemp(prefix="rsmx-host-")), False
    else:
        directory, cached = Path(cache_dir) if cache_dir is not None else default_dir(), True
    out = {}
    for name, source in modules.items():
        filename = f"{name}-{key(source, headers)}.so"
        path = directory / filename
        if not (cached and path.is_file()):
            build_module(name, source, headers, directory, filename)
        out[name] = path
    return out

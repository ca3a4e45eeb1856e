"""Compiling CUDA C with NVRTC (``cuda.bindings.nvrtc``) to CUBIN or PTX, with the
ptxas resource report of each kernel read from the compile log."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Options every rsmx kernel is compiled with: no fast math, so results follow MXNet.
BASE_OPTIONS = ("--std=c++17", "-Xptxas", "-v")


class CompileError(Exception):
    """NVRTC refused a source; the message holds its log."""


@dataclass(frozen=True)
class Resources:
    """ptxas's report for one kernel."""

    registers: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    shared: int


@dataclass(frozen=True)
class Compiled:
    """A compiled module: the code, NVRTC's log, and the resources per kernel."""

    code: bytes
    log: str
    resources: dict[str, Resources]

    @property
    def warnings(self) -> list[str]:
        """The log's warning lines (NVRTC has no warnings-as-errors)."""
        return [ln for ln in self.log.splitlines() if "warning" in ln.lower()]


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_resources(log: str) -> dict[str, Resources]:
    """Each kernel's registers, stack frame, spills and static shared memory, from a log
    compiled with ``-Xptxas -v``."""
    out: dict[str, Resources] = {}
    name = None
    fields: dict[str, int] = {}
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            name, fields = m.group(1), {}
        elif name is None:
            continue
        elif m := _FRAME.search(line):
            fields.update(stack_frame=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif m := _REGS.search(line):
            fields["registers"] = int(m[1])
            s = _SMEM.search(line)
            fields["shared"] = int(s[1]) if s else 0
            out[name] = Resources(
                fields["registers"],
                fields.get("stack_frame", 0),
                fields.get("spill_stores", 0),
                fields.get("spill_loads", 0),
                fields["shared"],
            )
            name = None
    return out


def _check(result, what: str, log: str = "") -> None:
    status = result[0] if isinstance(result, tuple) else result
    if int(status) != 0:
        raise CompileError(f"{what} failed ({status!r})" + (f":\n{log}" if log else ""))


def compile_source(
    source: str,
    name: str,
    arch: str,
    headers: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> Compiled:
    """Compiles ``source`` (file name ``name``) for ``arch``: ``sm_XY`` gives CUBIN,
    ``compute_XY`` PTX. ``headers`` maps include names to their text.

    Raises
    ------
    CompileError
        With NVRTC's log when the source does not compile.
    """
    from cuda.bindings import nvrtc

    headers = headers or {}
    err, prog = nvrtc.nvrtcCreateProgram(
        source.encode(),
        name.encode(),
        len(headers),
        [h.encode() for h in headers.values()],
        [n.encode() for n in headers],
    )
    _check(err, f"nvrtcCreateProgram({name})")
    try:
        opts = [f"--gpu-architecture={arch}", *BASE_OPTIONS, *options]
        status = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        # Fresh mutable buffers: NVRTC writes into them, and short bytes objects are
        # shared by the interpreter.
        buf = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = bytes(buf).rstrip(b"\0 ").decode(errors="replace")
        _check(status, f"compiling {name} for {arch}", log)
        cubin = arch.startswith("sm_")
        get_size = nvrtc.nvrtcGetCUBINSize if cubin else nvrtc.nvrtcGetPTXSize
        get = nvrtc.nvrtcGetCUBIN if cubin else nvrtc.nvrtcGetPTX
        _, size = get_size(prog)
        code = bytearray(size)
        _check(get(prog, code), f"reading the code of {name}")
        if not cubin:
            code = code.rstrip(b"\0")
        return Compiled(bytes(code), log, parse_resources(log))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def version() -> tuple[int, int]:
    """NVRTC's (major, minor)."""
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return int(major), int(minor)

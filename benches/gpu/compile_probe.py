"""Compiles ``probe.cu`` with the NVRTC of this interpreter's environment, to CUBIN and PTX.

    python compile_probe.py OUTDIR [--src probe.cu] [--arch sm_90 --arch compute_90]

Writes ``OUTDIR/probe-<nvrtc major.minor>-<arch>.cubin`` for each ``sm_XY`` and ``.ptx``
for each ``compute_XY``, and prints one JSON record describing what was produced (NVRTC
and package versions, sizes, SHA-256, the PTX ISA version, ptxas's report). Uses only
``cuda.bindings.nvrtc`` and ``cuda.pathfinder``: no rsmx, no GPU, no driver.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS = ("--std=c++17", "-Xptxas", "-v")


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check(result, what: str, log: str = "") -> None:
    status = result[0] if isinstance(result, tuple) else result
    if int(status) != 0:
        raise RuntimeError(f"{what}: {status!r}" + (f"\n{log}" if log else ""))


def compile_one(nvrtc, source: bytes, arch: str) -> tuple[bytes, str, float]:
    """``(code, log, seconds)``; PTX comes back NUL-terminated, as the driver takes it."""
    err, prog = nvrtc.nvrtcCreateProgram(source, b"probe.cu", 0, [], [])
    check(err, "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in OPTIONS)]
        t = time.perf_counter()
        status = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        seconds = time.perf_counter() - t
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = bytearray(size)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = bytes(buf).rstrip(b"\0").decode(errors="replace")
        check(status, f"nvrtcCompileProgram({arch})", log)
        cubin = arch.startswith("sm_")
        get_size = nvrtc.nvrtcGetCUBINSize if cubin else nvrtc.nvrtcGetPTXSize
        get = nvrtc.nvrtcGetCUBIN if cubin else nvrtc.nvrtcGetPTX
        _, size = get_size(prog)
        code = bytearray(size)
        check(get(prog, code), f"reading the {arch} code")
        if not cubin:
            code = code.rstrip(b"\0") + b"\0"
        return bytes(code), log, seconds
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir")
    p.add_argument("--src", default=os.path.join(HERE, "probe.cu"))
    p.add_argument("--arch", action="append", default=None,
                   help="sm_XY (CUBIN) or compute_XY (PTX); default sm_90 and compute_90")
    args = p.parse_args()
    archs = args.arch or ["sm_90", "compute_90"]

    # pathfinder loads NVRTC's builtins library first (NVRTC 13.0 needs it).
    loaded = None
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        loaded = load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception as e:  # the bindings may still find it themselves
        loaded = f"pathfinder failed: {type(e).__name__}: {e}"
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    tag = f"{major}.{minor}"
    _, supported = nvrtc.nvrtcGetSupportedArchs()
    with open(args.src, "rb") as f:
        source = f.read()
    os.makedirs(args.outdir, exist_ok=True)
    record = {
        "nvrtc": tag,
        "nvrtc_library": loaded,
        "packages": {
            n: dist_version(n)
            for n in ("cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12")
            if dist_version(n)
        },
        "supported_archs": [int(a) for a in supported],
        "source_sha256": hashlib.sha256(source).hexdigest(),
        "options": list(OPTIONS),
        "files": [],
    }
    failed = False
    for arch in archs:
        ext = "cubin" if arch.startswith("sm_") else "ptx"
        name = f"probe-{tag}-{arch}.{ext}"
        entry: dict = {"file": name, "arch": arch, "kind": ext}
        try:
            code, log, seconds = compile_one(nvrtc, source, arch)
            with open(os.path.join(args.outdir, name), "wb") as f:
                f.write(code)
            entry.update(bytes=len(code), sha256=hashlib.sha256(code).hexdigest(),
                         compile_s=round(seconds, 3), log=log.strip())
            if ext == "ptx":
                m = re.search(rb"^\.version\s+(\S+)", code, re.M)
                entry["ptx_isa"] = m.group(1).decode() if m else None
        except Exception as e:
            failed = True
            entry["error"] = f"{type(e).__name__}: {e}"
        record["files"].append(entry)
    print(json.dumps(record))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

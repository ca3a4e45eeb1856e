"""Driver compatibility matrix, with ``cuda.bindings.driver`` only.

    python compat.py PROBEDIR [--repo DIR] [--json FILE] [--summary FILE] [--rsmx-modules]

- ``cuGetProcAddress(name, 12000, 0)`` for every driver symbol rsmx uses, before and after
  ``cuInit`` (names ending in ``_v2`` are looked up by their base name: version 12000
  selects the ``_v2`` ABI);
- ``cuInit``, the driver version and the devices;
- ``cuModuleLoadData`` of each probe in PROBEDIR (``probe-*.cubin``, ``probe-*.ptx``, made
  by ``make_probes.sh``), and for those that load, launches of ``saxpy`` and ``block_sum``
  checked against numpy;
- with ``--rsmx-modules``: rsmx's own kernel modules compiled by this machine's NVRTC for
  gpu(0)'s architecture (``rsmx.cuda.build``) and loaded the same way.

Never raises: every failure is a line in the output, and the exit status is 0 whenever the
script itself ran to the end (no driver included).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import re
import sys
import time
import traceback

CUDA_ABI = 12000


def reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def name_of(status) -> str:
    return getattr(status, "name", None) or str(status)


def ok(status) -> bool:
    return int(status) == 0


def call(fn, *args):
    """The values after the status of a cuda.bindings call, or RuntimeError naming it."""
    out = fn(*args)
    status, values = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    if not ok(status):
        raise RuntimeError(f"{fn.__name__}: {name_of(status)}")
    return values[0] if len(values) == 1 else values


# ------------------------------------------------------------------ the symbols rsmx uses


def rsmx_symbols(repo: str) -> tuple[list[str], str]:
    """rsmx's driver symbols and where the list came from."""
    try:
        from rsmx import _core

        fn = getattr(_core, "cuda_driver_symbols", None)
        if fn is not None:
            return list(fn()), "rsmx._core.cuda_driver_symbols()"
    except Exception:
        pass
    path = os.path.join(repo, "src", "cuda", "driver.rs")
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        return [], f"none ({reason(e)})"
    m = re.search(r"^driver_table!\s*\{(.*?)^\}", text, re.S | re.M)
    if not m:
        return [], f"none (no driver_table! block in {path})"
    names = re.findall(r'=\s*"(cu\w+)"\s*:', m.group(1))
    return names, f"parsed from {os.path.relpath(path)}"


def resolve(driver, names: list[str]) -> dict[str, dict]:
    """``cuGetProcAddress`` of each name: address, status and the name actually asked."""
    out = {}
    for full in names:
        asked = full[:-3] if full.endswith("_v2") else full
        entry: dict = {"asked": asked}
        try:
            res = driver.cuGetProcAddress(asked.encode(), CUDA_ABI, 0)
            status, pfn = res[0], res[1]
            sym_status = res[2] if len(res) > 2 else None
            entry["result"] = name_of(status)
            entry["address"] = int(pfn) if pfn is not None else 0
            if sym_status is not None:
                entry["symbol_status"] = name_of(sym_status)
        except Exception as e:
            entry["result"] = reason(e)
            entry["address"] = 0
        entry["resolved"] = entry["address"] != 0
        out[full] = entry
    return out


# ------------------------------------------------------------------ devices and probes


def device_info(driver, ordinal: int) -> dict:
    dev = call(driver.cuDeviceGet, ordinal)
    name = call(driver.cuDeviceGetName, 256, dev)
    info: dict = {"ordinal": ordinal, "name": bytes(name).split(b"\0", 1)[0].decode(errors="replace")}
    attr = driver.CUdevice_attribute
    wanted = {
        "cc_major": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
        "cc_minor": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
        "sm_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
        "smem_per_block_optin": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
        "l2_bytes": "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE",
        "async_engines": "CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT",
        "memory_pools": "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED",
    }
    for key, a in wanted.items():
        try:
            info[key] = int(call(driver.cuDeviceGetAttribute, getattr(attr, a), dev))
        except Exception as e:
            info[key] = reason(e)
    try:
        info["total_mem"] = int(call(driver.cuDeviceTotalMem, dev))
    except Exception as e:
        info["total_mem"] = reason(e)
    return info


class Launcher:
    """Device buffers and launches of the probe kernels on the current context."""

    def __init__(self, driver):
        self.d = driver

    def alloc(self, host) -> object:
        ptr = call(self.d.cuMemAlloc, host.nbytes)
        call(self.d.cuMemcpyHtoD, ptr, host, host.nbytes)
        return ptr

    def launch(self, fn, grid: int, block: int, smem: int, args: list) -> None:
        keep = list(args)
        params = (ctypes.c_void_p * len(keep))(*(ctypes.addressof(v) for v in keep))
        call(self.d.cuLaunchKernel, fn, grid, 1, 1, block, 1, 1, smem, self.d.CUstream(0),
             ctypes.addressof(params), 0)
        call(self.d.cuCtxSynchronize)

    def read(self, ptr, host) -> None:
        call(self.d.cuMemcpyDtoH, host, ptr, host.nbytes)

    def free(self, *ptrs) -> None:
        for p in ptrs:
            try:
                self.d.cuMemFree(p)
            except Exception:
                pass


def run_saxpy(driver, module) -> str:
    import numpy as np

    fn = call(driver.cuModuleGetFunction, module, b"saxpy")
    L = Launcher(driver)
    n = (1 << 20) + 3
    x = np.arange(n, dtype=np.float32) * np.float32(0.5)
    y = np.ones(n, dtype=np.float32)
    dx, dy = L.alloc(x), L.alloc(y)
    try:
        L.launch(fn, 1024, 256, 0, [ctypes.c_int(n), ctypes.c_float(2.0),
                                    ctypes.c_uint64(int(dx)), ctypes.c_uint64(int(dy))])
        out = np.full(n, np.nan, dtype=np.float32)
        L.read(dy, out)
    finally:
        L.free(dx, dy)
    want = np.float32(2.0) * x + y
    bad = int(np.count_nonzero(out != want))
    return "ok" if bad == 0 else f"WRONG ({bad} of {n} differ)"


def run_block_sum(driver, module) -> str:
    import numpy as np

    fn = call(driver.cuModuleGetFunction, module, b"block_sum")
    L = Launcher(driver)
    n, block = 100003, 256
    grid = (n + block - 1) // block
    x = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    out = np.full(grid, np.nan, dtype=np.float32)
    dx, dout = L.alloc(x), L.alloc(out)
    try:
        L.launch(fn, grid, block, block * 4, [ctypes.c_uint64(int(dx)), ctypes.c_uint64(int(dout)),
                                              ctypes.c_int(n)])
        L.read(dout, out)
    finally:
        L.free(dx, dout)
    padded = np.zeros(grid * block, dtype=np.float64)
    padded[:n] = x
    want = padded.reshape(grid, block).sum(axis=1)
    err = float(np.max(np.abs(out - want)))
    return "ok" if err < 1e-4 else f"WRONG (max abs err {err:.3g})"


def load(driver, image: bytes) -> tuple[object | None, str, float]:
    t = time.perf_counter()
    try:
        res = driver.cuModuleLoadData(image)
        status, module = res[0], res[1]
        return (module if ok(status) else None), name_of(status), time.perf_counter() - t
    except Exception as e:
        return None, reason(e), time.perf_counter() - t


def probe_matrix(driver, probedir: str) -> list[dict]:
    rows = []
    files = sorted(glob.glob(os.path.join(probedir, "probe-*.cubin"))) + sorted(
        glob.glob(os.path.join(probedir, "probe-*.ptx"))
    )
    for path in files:
        with open(path, "rb") as f:
            image = f.read()
        if path.endswith(".ptx") and not image.endswith(b"\0"):
            image += b"\0"
        row: dict = {"file": os.path.basename(path), "bytes": len(image)}
        module, result, seconds = load(driver, image)
        row.update(load=result, load_ms=round(seconds * 1e3, 2))
        if module is not None:
            for kernel, fn in (("saxpy", run_saxpy), ("block_sum", run_block_sum)):
                try:
                    row[kernel] = fn(driver, module)
                except Exception as e:
                    row[kernel] = reason(e)
            try:
                driver.cuModuleUnload(module)
            except Exception:
                pass
        rows.append(row)
    return rows


def rsmx_modules(driver, cc: tuple[int, int]) -> dict:
    """rsmx's kernel modules compiled here for ``sm_<cc>`` and loaded."""
    out: dict = {"arch": f"sm_{cc[0]}{cc[1]}"}
    try:
        from rsmx.cuda import build, nvrtc

        out["nvrtc"] = "{}.{}".format(*nvrtc.version())
        t = time.perf_counter()
        modules = build.compile_all(out["arch"])
        out["compile_s"] = round(time.perf_counter() - t, 2)
    except Exception as e:
        out["error"] = reason(e)
        return out
    loaded = {}
    for name, image in modules.items():
        module, result, seconds = load(driver, image)
        loaded[name] = {"bytes": len(image), "load": result, "load_ms": round(seconds * 1e3, 2)}
        if module is not None:
            try:
                driver.cuModuleUnload(module)
            except Exception:
                pass
    out["modules"] = loaded
    return out


# ------------------------------------------------------------------ main


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("probedir")
    p.add_argument("--repo", default=".", help="the rsmx source tree (for src/cuda/driver.rs)")
    p.add_argument("--json", default=None)
    p.add_argument("--summary", default=None, help="write a one-line summary here")
    p.add_argument("--rsmx-modules", action="store_true")
    args = p.parse_args()

    res: dict = {"probedir": os.path.abspath(args.probedir)}
    summary: list[str] = []

    def finish() -> int:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
        line = "; ".join(summary)
        print("summary: " + line)
        if args.summary:
            with open(args.summary, "w") as f:
                f.write(line + "\n")
        return 0

    try:
        import cuda.bindings
        from cuda.bindings import driver

        res["cuda_bindings"] = getattr(cuda.bindings, "__version__", "?")
        print(f"cuda-bindings {res['cuda_bindings']}")
    except Exception as e:
        res["error"] = f"no cuda-bindings: {reason(e)}"
        print(res["error"])
        summary.append(res["error"])
        return finish()

    names, source = rsmx_symbols(args.repo)
    res["symbols_from"] = source
    print(f"driver symbols rsmx uses: {len(names)} ({source})")

    # Before cuInit. The first call loads libcuda; with no driver it raises here.
    try:
        res["symbols_before_init"] = resolve(driver, names)
        driver.cuDriverGetVersion()
    except Exception as e:
        res["error"] = f"no driver: {reason(e)}"
    if "error" not in res:
        try:
            call(driver.cuInit, 0)
            v = int(call(driver.cuDriverGetVersion))
            res["driver_version"] = v
            print(f"cuInit ok; driver API version {v // 1000}.{v % 1000 // 10}")
        except Exception as e:
            res["error"] = f"no driver: {reason(e)}"
    if "error" in res:
        print(res["error"])
        summary.append(res["error"])
        return finish()

    after = resolve(driver, names)
    res["symbols_after_init"] = after
    before = res["symbols_before_init"]
    n_before = sum(e["resolved"] for e in before.values())
    n_after = sum(e["resolved"] for e in after.values())
    changed = [s for s in names if before[s]["address"] != after[s]["address"]]
    print(f"cuGetProcAddress(name, {CUDA_ABI}, 0): {n_before}/{len(names)} before cuInit, "
          f"{n_after}/{len(names)} after" + (f"; address changed: {', '.join(changed)}" if changed else ""))
    for s in names:
        b, a = before[s], after[s]
        if not (b["resolved"] and a["resolved"]):
            print(f"  {s:<28} asked {a['asked']:<24} before: {b['result']} {b.get('symbol_status', '')}"
                  f" / after: {a['result']} {a.get('symbol_status', '')}")
    summary.append(f"driver {res['driver_version']}; symbols {n_before}/{len(names)} before, "
                   f"{n_after}/{len(names)} after cuInit")

    try:
        count = int(call(driver.cuDeviceGetCount))
        res["devices"] = [device_info(driver, i) for i in range(count)]
    except Exception as e:
        res["error"] = f"devices: {reason(e)}"
        print(res["error"])
        summary.append(res["error"])
        return finish()
    for d in res["devices"]:
        print(f"gpu({d['ordinal']}): {d['name']}, cc {d['cc_major']}.{d['cc_minor']}, "
              f"{d['sm_count']} SMs, {d['total_mem']} B, smem opt-in {d['smem_per_block_optin']} B")
    if not res["devices"]:
        summary.append("no devices")
        return finish()

    try:
        dev = call(driver.cuDeviceGet, 0)
        ctx = call(driver.cuDevicePrimaryCtxRetain, dev)
        call(driver.cuCtxSetCurrent, ctx)
    except Exception as e:
        res["error"] = f"primary context: {reason(e)}"
        print(res["error"])
        summary.append(res["error"])
        return finish()

    res["probes"] = probe_matrix(driver, args.probedir)
    if not res["probes"]:
        print(f"no probe files in {args.probedir}")
        summary.append("no probe files")
    print(f"{'probe':<28}{'bytes':>7}  {'cuModuleLoadData':<40}{'ms':>8}  saxpy / block_sum")
    for r in res["probes"]:
        print(f"{r['file']:<28}{r['bytes']:>7}  {r['load']:<40}{r['load_ms']:>8.2f}  "
              f"{r.get('saxpy', '-')} / {r.get('block_sum', '-')}")
    loads = [f"{r['file'][6:].rsplit('.', 1)[0]}:{'ok' if r['load'] == 'CUDA_SUCCESS' else r['load']}"
             for r in res["probes"]]
    if loads:
        summary.append("loads " + " ".join(loads))

    if args.rsmx_modules:
        d0 = res["devices"][0]
        try:
            rm = rsmx_modules(driver, (d0["cc_major"], d0["cc_minor"]))
        except Exception as e:
            rm = {"error": reason(e)}
        res["rsmx_modules"] = rm
        if "error" in rm:
            print(f"rsmx modules: {rm['error']}")
            summary.append(f"rsmx modules: {rm['error']}")
        else:
            print(f"rsmx modules for {rm['arch']} with NVRTC {rm['nvrtc']} ({rm['compile_s']} s): "
                  + ", ".join(f"{n} {m['bytes']} B {m['load']}" for n, m in rm["modules"].items()))
            good = sum(m["load"] == "CUDA_SUCCESS" for m in rm["modules"].values())
            summary.append(f"rsmx modules {good}/{len(rm['modules'])} load")
    return finish()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(1)

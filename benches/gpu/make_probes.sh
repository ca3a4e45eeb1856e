#!/usr/bin/env bash
# Compiles benches/gpu/probe.cu with NVRTC 12.9, 13.0 and 13.5 to CUBIN sm_90 and PTX
# compute_90, for the driver compatibility matrix of first_run.sh. Runs on a CPU machine
# with network access (the GPU machine has neither network nor these NVRTC versions).
#
#   bash benches/gpu/make_probes.sh OUTDIR        # e.g. .whl/probes
#
# Each NVRTC gets a throwaway venv under ${PROBE_VENVS:-/tmp/rsmx-probe-venvs}, reused on
# later runs. Writes OUTDIR/probe-<nvrtc>-sm_90.cubin, OUTDIR/probe-<nvrtc>-compute_90.ptx
# and OUTDIR/manifest.json (versions, sizes, hashes, ptxas reports).
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
venvs=${PROBE_VENVS:-/tmp/rsmx-probe-venvs}
python=${PYTHON:-python3}
mkdir -p "$venvs"

# tag|packages
toolchains=(
    "12.9|nvidia-cuda-nvrtc-cu12==12.9.86 cuda-bindings==12.9.* cuda-pathfinder>=1.1"
    "13.0|nvidia-cuda-nvrtc==13.0.88 cuda-bindings==13.0.3 cuda-pathfinder>=1.1"
    "13.5|nvidia-cuda-nvrtc==13.5.37 cuda-bindings==13.5.0 cuda-pathfinder>=1.1"
)

records=()
status=0
for tc in "${toolchains[@]}"; do
    tag=${tc%%|*}
    pkgs=${tc#*|}
    venv=$venvs/nvrtc-$tag
    echo "== NVRTC $tag: $pkgs"
    if [ ! -f "$venv/.ready" ] || [ "$(cat "$venv/.ready")" != "$pkgs" ]; then
        rm -rf "$venv"
        # shellcheck disable=SC2086  # the package list splits on purpose
        if ! { "$python" -m venv "$venv" &&
               "$venv/bin/python" -m pip install -q --disable-pip-version-check $pkgs; }; then
            echo "   could not install $pkgs" >&2
            status=1
            continue
        fi
        echo "$pkgs" > "$venv/.ready"
    fi
    rec=$out/.record-$tag.json
    if "$venv/bin/python" "$here/compile_probe.py" "$out" > "$rec"; then
        records+=("$rec")
    else
        echo "   compile failed: $(cat "$rec")" >&2
        [ -s "$rec" ] && records+=("$rec")
        status=1
    fi
done

"$python" - "$out/manifest.json" "${records[@]}" <<'PY'
import json, sys, time
out, paths = sys.argv[1], sys.argv[2:]
records = []
for p in paths:
    with open(p) as f:
        records.append(json.loads(f.read().strip().splitlines()[-1]))
manifest = {"made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "source": "benches/gpu/probe.cu", "toolchains": records}
with open(out, "w") as f:
    json.dump(manifest, f, indent=1)
for r in records:
    for e in r["files"]:
        what = f"{e['bytes']:>8} B" if "bytes" in e else "FAILED " + e.get("error", "")
        extra = f"  PTX ISA {e['ptx_isa']}" if e.get("ptx_isa") else ""
        print(f"   {e['file']:<28} {what}{extra}")
PY
rm -f "$out"/.record-*.json
ls -l "$out"
exit $status

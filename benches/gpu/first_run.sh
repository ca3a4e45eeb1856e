#!/usr/bin/env bash
# rsmx's first run on a real GPU (design/gpu.md section 8), in one bounded run.
#
#   bash benches/gpu/first_run.sh OUTDIR [PROBEDIR]
#
# Run from anywhere inside the rsmx source tree's copy, with rsmx importable (PYTHONPATH
# pointing at the installed wheel). PROBEDIR (default .whl/probes) holds the CUBIN/PTX
# probes from make_probes.sh. Every step is logged into OUTDIR/<step>.log, has its own time
# limit and may fail without stopping the others; the whole run keeps within
# FIRST_RUN_BUDGET seconds (default 420). Ends with a table, also written to
# OUTDIR/report.md. Exits 0 unless OUTDIR cannot be written.
#
# Steps: image (versions, GPU, virtualisation) / compat (driver symbols, probe loads and
# launches, rsmx's modules) / pytest -m gpu (the GPU tests and the GPU cases of every
# device-parametrised test) under each engine type / figures (gpu_bench.py) /
# compute-sanitizer.
set -u

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTDIR [PROBEDIR]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
probes=${2:-${PROBES:-$repo/.whl/probes}}
cd "$repo" || exit 2

budget=${FIRST_RUN_BUDGET:-420}
image_limit=${FIRST_RUN_IMAGE_LIMIT:-60}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
export RSMX_CUDA_CACHE_DIR=${RSMX_CUDA_CACHE_DIR:-$out/cuda-cache}
unset RSMX_ENGINE_TYPE
t_start=$(date +%s%N)
run_log=$out/run.log
: > "$run_log"

elapsed_s() { echo $(( ($(date +%s%N) - t_start) / 1000000000 )); }
say() { echo "$*" | tee -a "$run_log"; }

rows=()   # name|status|seconds|summary

# step NAME LIMIT RESERVE COMMAND...: runs COMMAND with output in OUTDIR/NAME.log, for at
# most LIMIT seconds and never into the last RESERVE seconds of the budget (kept for the
# steps after it; given for the default budget of 420 s and scaled with the budget). A summary is read from OUTDIR/NAME.summary if the command wrote one.
step() {
    local name=$1 limit=$2 reserve=$3
    shift 3
    reserve=$(( reserve * budget / 420 ))  # reserves are sized for the default budget
    local left=$(( budget - $(elapsed_s) - reserve ))
    local t=$(( limit < left ? limit : left ))
    if [ "$t" -lt 10 ]; then
        say "== $name: skipped (time budget: ${left}s left after the reserve)"
        rows+=("$name|skipped|0|time budget spent")
        return
    fi
    rm -f "$out/$name.summary"
    say "== $name (limit ${t}s): $*"
    local t0 rc ms status summary=""
    t0=$(date +%s%N)
    timeout -k 5 "$t" "$@" > "$out/$name.log" 2>&1 < /dev/null
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    case $rc in
        0) status=ok ;;
        124|137) status=timeout ;;
        *) status="rc=$rc" ;;
    esac
    if [ -s "$out/$name.summary" ]; then
        summary=$(head -c 300 "$out/$name.summary" | head -1)
    else
        summary=$(grep -v '^\s*$' "$out/$name.log" | tail -1 | head -c 200)
    fi
    rows+=("$name|$status|$(( ms / 1000 )).$(( ms % 1000 / 100 ))|$summary")
    say "   $status in ${ms} ms: $summary"
    STEP_RC=$rc
}

# rec TITLE LIMIT COMMAND...: appends the command's output to image.log under a heading.
# The image step as a whole stops after FIRST_RUN_IMAGE_LIMIT seconds (default 60).
rec() {
    local title=$1 limit=$2
    shift 2
    local left=$(( image_limit - $(elapsed_s) ))
    if [ "$left" -lt 3 ]; then
        printf '### %s\n(skipped: the image step used its %s s)\n\n' "$title" "$image_limit" >> "$out/image.log"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    {
        echo "### $title"
        timeout -k 2 "$limit" "$@" 2>&1 < /dev/null
        local rc=$?
        [ $rc -ne 0 ] && echo "(exit $rc)"
        echo
    } >> "$out/image.log"
}

# ------------------------------------------------------------------ 1. the image
say "== image"
t0=$(date +%s%N)
: > "$out/image.log"
rec "date" 5 date -u
rec "nvidia-smi" 30 nvidia-smi
rec "nvidia-smi -q (first 60 lines)" 30 bash -c 'nvidia-smi -q | head -60'
rec "nvidia-smi query" 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.mem,power.limit,pcie.link.gen.max,pcie.link.width.max --format=csv
rec "python" 10 bash -c "command -v $py; $py --version; $py -m pip --version"
versions_py='
from importlib import metadata
names = ["rsmx", "cuda-python", "cuda-bindings", "cuda-core", "cuda-pathfinder", "cuda-toolkit",
         "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cudnn-cu13",
         "nvidia-nccl-cu13", "nvidia-nvjitlink", "nvidia-cuda-nvcc", "nvidia-cuda-cupti",
         "torch", "numpy", "cupy-cuda13x", "numba-cuda", "pytest", "pytest-timeout"]
for n in names:
    try:
        print(f"{n:<22} {metadata.version(n)}")
    except metadata.PackageNotFoundError:
        print(f"{n:<22} -")
'
rec "package versions" 20 "$py" -c "$versions_py"
rec "pip list (cuda, nvidia, torch, numpy)" 30 bash -c "$py -m pip list 2>/dev/null | grep -iE 'cuda|nvidia|torch|numpy|cupy|numba|pytest|rsmx'"
rec "rsmx import" 30 "$py" -c "import rsmx, rsmx._core as c; print(rsmx.__file__); print('num_gpus', rsmx.context.num_gpus()); print('cuda functions in _core:', sorted(n for n in dir(c) if 'cuda' in n or 'gpu' in n))"
rec "python3 -m rsmx.cuda" 60 "$py" -m rsmx.cuda
# shellcheck disable=SC2016  # expanded by the inner shell
rec "compute-sanitizer" 20 bash -c 'for c in "$(command -v compute-sanitizer)" /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do [ -x "$c" ] && { echo "$c"; "$c" --version | tail -2; exit 0; }; done; echo "not found"'
rec "nvcc" 10 bash -c 'command -v nvcc && nvcc --version | tail -2 || echo "not found"'
rec "uname -a" 5 uname -a
rec "/proc/version" 5 cat /proc/version
# shellcheck disable=SC2016  # expanded by the inner shell
rec "cpu" 5 bash -c 'grep -m1 "model name" /proc/cpuinfo; echo "cpus: $(nproc)"; grep -m1 -o -w hypervisor /proc/cpuinfo || echo "no hypervisor flag"; free -g | head -2'
rec "systemd-detect-virt" 5 bash -c 'command -v systemd-detect-virt >/dev/null && systemd-detect-virt || echo "systemd-detect-virt: not present"'
# shellcheck disable=SC2016  # expanded by the inner shell
rec "dmi" 5 bash -c 'for f in sys_vendor product_name bios_vendor; do echo "$f: $(cat /sys/class/dmi/id/$f 2>&1)"; done'
rec "dmesg (head)" 5 bash -c 'dmesg 2>&1 | head -15'
rec "/dev/nvidia*" 5 bash -c 'ls -l /dev/nvidia* 2>&1 | head'
rec "cgroup, mounts" 5 bash -c 'head -5 /proc/1/cgroup; grep -iE " / |9p|gofer|overlay" /proc/mounts | head -5'
gpu=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)
virt=unknown
if grep -qi gvisor "$out/image.log"; then virt=gVisor
elif grep -qi firecracker "$out/image.log"; then virt=Firecracker
elif v=$(timeout 5 systemd-detect-virt 2>/dev/null) && [ -n "$v" ]; then virt=$v
fi
versions=$(grep -E '^(cuda-bindings|torch|nvidia-cuda-nvrtc) ' "$out/image.log" | awk '!seen[$1]++ {printf "%s %s, ", $1, $2}')
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
image_summary="${gpu:-no nvidia-smi GPU}; ${versions}virt: $virt"
rows+=("image|ok|$(( ms / 1000 )).$(( ms % 1000 / 100 ))|$image_summary")
say "   $image_summary"
[ -f "$probes/manifest.json" ] && cp "$probes/manifest.json" "$out/probes-manifest.json"

# ------------------------------------------------------------------ 2. compatibility matrix
step compat 90 200 "$py" "$here/compat.py" "$probes" --repo "$repo" --json "$out/compat.json" \
    --summary "$out/compat.summary" --rsmx-modules

# ------------------------------------------------------------------ 3. GPU tests, each engine
timeout_opt=()
if timeout 20 "$py" -c "import pytest_timeout" 2>/dev/null; then
    timeout_opt=(--timeout 120)
else
    say "   pytest-timeout is not installed: tests run without a per-test limit"
fi
for engine in ThreadedEnginePerDevice ThreadedEngine NaiveEngine; do
    STEP_RC=0
    step "pytest-$engine" 120 160 env MXNET_ENGINE_TYPE=$engine RSMX_CHECK_BORROWS=1 \
        "$py" -m pytest -q -p no:cacheprovider -m gpu tests/ -x "${timeout_opt[@]}"
    if [ "$STEP_RC" = 5 ]; then  # pytest: nothing selected
        last=${#rows[@]}
        IFS='|' read -r n _ s m <<< "${rows[$((last - 1))]}"
        rows[last-1]="$n|ok (empty)|$s|$m"
    fi
done

# ------------------------------------------------------------------ 4. figures
left=$(( budget - $(elapsed_s) - 60 * budget / 420 ))
step figures 240 60 "$py" "$here/gpu_bench.py" --out "$out" --summary "$out/figures.summary" \
    --budget $(( (left < 240 ? left : 240) - 10 ))

# ------------------------------------------------------------------ 5. compute-sanitizer
sanitizer=""
for c in "$(command -v compute-sanitizer 2>/dev/null)" /usr/local/cuda/bin/compute-sanitizer \
         /usr/local/cuda-*/bin/compute-sanitizer; do
    if [ -n "$c" ] && [ -x "$c" ]; then sanitizer=$c; break; fi
done
STEP_RC=0
step sanitize-plain 30 10 "$py" "$here/sanitize_target.py"
target_rc=$STEP_RC
if [ -z "$sanitizer" ]; then
    say "== sanitizer: compute-sanitizer not found"
    rows+=("sanitizer|skipped|0|compute-sanitizer not found")
elif [ "$target_rc" != 0 ] && [ "$target_rc" != 1 ]; then  # 1: ran, a result was wrong
    say "== sanitizer: skipped, the target could not run on the GPU (exit $target_rc)"
    rows+=("sanitizer|skipped|0|target exit $target_rc: $(tail -1 "$out/sanitize-plain.log" | head -c 150)")
else
    for tool in memcheck racecheck synccheck; do
        step "sanitizer-$tool" 60 0 "$sanitizer" --tool "$tool" --error-exitcode 99 \
            --print-limit 20 "$py" "$here/sanitize_target.py"
        summ=$(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$out/sanitizer-$tool.log" | tail -1)
        if [ -n "$summ" ]; then
            last=${#rows[@]}
            IFS='|' read -r n st s _ <<< "${rows[$((last - 1))]}"
            rows[last-1]="$n|$st|$s|$summ"
        fi
    done
fi

# ------------------------------------------------------------------ report
total=$(elapsed_s)
{
    echo "# rsmx first GPU run"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); host: $(uname -n); total: ${total} s of a ${budget} s budget"
    echo "- GPU: ${gpu:-none found}; virtualisation: $virt"
    echo "- repo: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'); probes: $probes"
    echo
    echo "| step | status | seconds | summary |"
    echo "|---|---|---|---|"
    for r in "${rows[@]}"; do
        IFS='|' read -r n st s m <<< "$r"
        echo "| $n | $st | $s | ${m//|//} |"
    done
    if [ -s "$out/figures.txt" ]; then
        echo
        echo '## Figures'
        echo
        echo '```'
        cat "$out/figures.txt"
        echo '```'
    fi
    failures=$(grep -h -E '^(FAILED|ERROR) ' "$out"/pytest-*.log 2>/dev/null | head -30)
    if [ -n "$failures" ]; then
        echo
        echo '## Test failures (first 30)'
        echo
        echo '```'
        echo "$failures"
        echo '```'
    fi
    if [ -s "$out/compat.log" ]; then
        echo
        echo '## Compatibility'
        echo
        echo '```'
        head -60 "$out/compat.log"
        echo '```'
    fi
    echo
    echo "Logs: $out/*.log; figures.json, compat.json."
} > "$out/report.md"

echo
printf '%-32s %-12s %8s  %s\n' step status seconds summary | tee -a "$run_log"
for r in "${rows[@]}"; do
    IFS='|' read -r n st s m <<< "$r"
    printf '%-32s %-12s %8s  %s\n' "$n" "$st" "$s" "$m" | tee -a "$run_log"
done
echo "total ${total} s; report: $out/report.md" | tee -a "$run_log"
exit 0

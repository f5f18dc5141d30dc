#!/usr/bin/env bash
# The GPU check: everything a first, cold GPU machine can tell about dy2stat, in one
# run of about 8 minutes, every log and result in one folder ($OUT). See docs/gpu.md.
#
#   bash benchmarks/gpu_check.sh                 # on the GPU machine
#   bash benchmarks/gpu_check.sh --dry-run       # every phase on the CuPy test double (no GPU)
#   bash benchmarks/gpu_check.sh --install-only  # phases 1-2, then how to run the tests
#
# Phases, each in its own time box (seconds), so a phase that hangs costs its box only:
#   1 machine   (20)  nvidia-smi, nvcc, Python and package versions   -> machine.txt
#   2 install   (60)  wheels from .whl/, dy2stat from this tree        -> install.log
#   3 probe     (90)  launch and sync cost, the W2 loop four ways,
#                     convolution generic vs cuDNN                     -> probe.txt, probe.json
#   4 tests    (210)  pytest -m gpu, a per-test limit, JUnit XML       -> tests.log, tests.xml
#   5 bench    (120)  benchmarks/gpu_bench.py                          -> bench.txt, bench.json
# summary.txt lists each phase's exit status and seconds (124: its box ran out).
#
# Environment: OUT (default $D2S_WORK/out), PYTHON (default python3), D2S_WORK (scratch,
# default /tmp/d2s-gpu-check), D2S_INSTALL=auto|pip|stage, TEST_TIMEOUT (per test,
# default 60), BENCH_ARGS (extra gpu_bench.py arguments), BOX_<PHASE> (a phase's box).

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="${D2S_WORK:-/tmp/d2s-gpu-check}"
OUT="${OUT:-$WORK/out}"
SITE="$WORK/site"
MODE="${D2S_INSTALL:-auto}"
DRY=0 INSTALL_ONLY=0
for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY=1 ;;
        --install-only) INSTALL_ONLY=1 ;;
        *) echo "unknown argument: $arg (use --dry-run or --install-only)"; exit 2 ;;
    esac
done
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT" "$WORK"
: > "$OUT/summary.txt"
if [ "$DRY" = 1 ]; then
    export D2S_FAKE_CUPY=1  # the gpu tests and the benchmark on tests/gpu/fake_cupy.py
    BENCH_ARGS="${BENCH_ARGS:---calls 2 --steps 1 --repeat 1}"
fi

say() { printf '\n== %s\n' "$*"; }

# phase NAME BOX COMMAND...: run COMMAND in its time box, log to $OUT/NAME.log (unless the
# command writes its own), record the exit status and the seconds in summary.txt.
phase() {
    local name="$1" box="$2"
    shift 2
    local var="BOX_${name^^}"
    box="${!var:-$box}"
    say "$name (box ${box} s)"
    local start=$SECONDS
    timeout --kill-after=5 "$box" "$@"
    local rc=$?
    local took=$((SECONDS - start))
    printf '%-8s exit %-3s %4s s (box %s s)%s\n' "$name" "$rc" "$took" "$box" \
        "$([ "$rc" = 124 ] && echo '  TIMED OUT')" | tee -a "$OUT/summary.txt"
    return "$rc"
}

# ------------------------------------------------ 1. the machine
machine() {
    {
        echo "date: $(date -u +%FT%TZ)  dry run: $DRY"
        if command -v nvidia-smi >/dev/null; then
            nvidia-smi
            nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
                --format=csv
        else
            echo "nvidia-smi: not found"
        fi
        command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not found"
        "$PY" - <<'PY'
import importlib, platform, sys
print("python", sys.version.split()[0], platform.platform())
for name in ("numpy", "cupy", "cudnn", "torch", "torchvision", "gast", "pytest", "numba"):
    try:
        module = importlib.import_module(name)
        print(f"{name}: {getattr(module, '__version__', '?')}")
    except Exception as exc:
        print(f"{name}: not importable ({type(exc).__name__}: {str(exc)[:120]})")
PY
    } > "$OUT/machine.txt" 2>&1
    cat "$OUT/machine.txt"
}
phase machine 20 bash -c "$(declare -f machine); PY='$PY' DRY='$DRY' OUT='$OUT' machine"

# ------------------------------------------------ 2. dy2stat from this tree, offline
install() {
    if compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" "$ROOT"/.whl/*.whl || { echo "installing .whl/*.whl failed"; return 2; }
        ls "$ROOT"/.whl/
    else
        echo "no .whl/ folder: using the packages already installed"
    fi
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    "$PY" - <<'PY' || return 2
import importlib.util, sys
need = ["numpy", "gast", "safetensors", "tqdm", "pytest"]
missing = [m for m in need if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"missing Python packages: {', '.join(missing)} (put their wheels in .whl/; "
             "see docs/gpu.md)")
print("found:", ", ".join(need))
PY
    local dst="$WORK/src"
    if [ "$MODE" != stage ] && "$PY" -m pip install -q --no-index --no-deps \
            --no-build-isolation -e "$ROOT" && (cd "$WORK" && "$PY" -c 'import dy2stat.runtime'); then
        echo "editable install of $ROOT"
        echo "RUN_DIR=$ROOT" > "$WORK/env"
    elif [ "$MODE" = pip ]; then
        echo "pip install -e failed"; return 2
    else  # a copy laid out as the installed package (pyproject's package-dir mapping)
        echo "staging a copy in $dst"
        rm -rf "$dst" && mkdir -p "$dst" || return 2
        (cd "$ROOT" && tar --exclude=.git --exclude=.whl --exclude='__pycache__' -cf - .) \
            | (cd "$dst" && tar -xf -) || return 2
        rm -rf "$dst/dy2stat/runtime" "$dst/dy2stat/kernels"
        cp -r "$ROOT/runtime" "$dst/dy2stat/runtime" && cp -r "$ROOT/kernels" "$dst/dy2stat/kernels"
        echo "RUN_DIR=$dst" > "$WORK/env"
        export PYTHONPATH="$dst:$PYTHONPATH"
    fi
    echo "PYTHONPATH=$PYTHONPATH" >> "$WORK/env"
    (cd "$WORK" && "$PY" -c 'import dy2stat, dy2stat.runtime, dy2stat.kernels') || return 2
    cd "$(sed -n 's/^RUN_DIR=//p' "$WORK/env")" && "$PY" - <<'PY'
import sys
import dy2stat as d2s
from dy2stat import device
print("python", sys.version.split()[0], "| dy2stat from", d2s.__file__)
for key, value in device.info().items():
    print(f"  {key}: {value}")
PY
}
phase install 60 bash -c "$(declare -f install); ROOT='$ROOT' PY='$PY' WORK='$WORK' \
    SITE='$SITE' MODE='$MODE' install" > "$OUT/install.log" 2>&1
rc=$?
cat "$OUT/install.log"
[ "$rc" = 0 ] || { echo "install failed: see $OUT/install.log"; exit 2; }
RUN_DIR="$(sed -n 's/^RUN_DIR=//p' "$WORK/env")"
export PYTHONPATH="$(sed -n 's/^PYTHONPATH=//p' "$WORK/env")"
cd "$RUN_DIR" || exit 2
if [ "$INSTALL_ONLY" = 1 ]; then
    echo "install only: run the tests with"
    echo "  cd $RUN_DIR && PYTHONPATH=$PYTHONPATH $PY -m pytest -m gpu tests"
    exit 0
fi

# ------------------------------------------------ 3. the probe
# shellcheck disable=SC2086  # BENCH_ARGS is a list of words
phase probe 90 "$PY" benchmarks/gpu_bench.py --probe --json "$OUT/probe.json" ${BENCH_ARGS:-} \
    > "$OUT/probe.txt" 2>&1
cat "$OUT/probe.txt"

# ------------------------------------------------ 4. the gpu-marked tests
phase tests 210 "$PY" -m pytest -m gpu tests -q -p no:cacheprovider -p tests.gpu.timeout_plugin \
    --per-test-timeout="${TEST_TIMEOUT:-60}" --junitxml="$OUT/tests.xml" -o addopts="" \
    -o junit_family=xunit2 > "$OUT/tests.log" 2>&1
tail -25 "$OUT/tests.log"

# ------------------------------------------------ 5. the benchmark
# shellcheck disable=SC2086
phase bench 120 "$PY" benchmarks/gpu_bench.py --json "$OUT/bench.json" ${BENCH_ARGS:-} \
    > "$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt"

say "summary (every file in $OUT)"
cat "$OUT/summary.txt"
! grep -qv ' exit 0 ' "$OUT/summary.txt"

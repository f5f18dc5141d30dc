#!/usr/bin/env bash
# The GPU check: install dy2stat from this source tree without network access,
# run the gpu-marked tests, then benchmarks/gpu_bench.py. See docs/gpu.md.
#
#   bash benchmarks/gpu_check.sh                 # everything
#   bash benchmarks/gpu_check.sh --install-only  # steps 1-2, then print how to run
#
# Wheels the machine lacks (gast) go in .whl/ beside the sources (docs/gpu.md
# gives the pip download command); they are installed with --no-index into a
# private folder. dy2stat itself is installed editable with the machine's own
# setuptools (no build isolation, no network); when that fails, a staged copy
# with runtime/ and kernels/ placed as dy2stat/runtime and dy2stat/kernels
# (what pyproject's package-dir mapping does) is used instead.
#
# Environment: OUT (where logs and results go; default $D2S_WORK/out),
# PYTHON (default python3), D2S_INSTALL=auto|pip|stage (default auto),
# D2S_WORK (scratch folder; default /tmp/d2s-gpu-check), BENCH_ARGS (extra
# arguments for gpu_bench.py).

set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="${D2S_WORK:-/tmp/d2s-gpu-check}"
OUT="${OUT:-$WORK/out}"
SITE="$WORK/site"
MODE="${D2S_INSTALL:-auto}"
INSTALL_ONLY=0
[ "${1:-}" = "--install-only" ] && INSTALL_ONLY=1
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT" "$WORK"

say() { printf '\n== %s\n' "$*"; }

# ------------------------------------------------ 1. wheels from .whl/ (no network)
say "wheels"
if compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$ROOT"/.whl/*.whl || { echo "installing .whl/*.whl failed"; exit 2; }
    ls "$ROOT"/.whl/
else
    echo "no .whl/ folder: using the packages already installed"
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - <<'EOF' || exit 2
import importlib.util, sys
need = ["numpy", "gast", "safetensors", "tqdm", "pytest"]
missing = [m for m in need if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"missing Python packages: {', '.join(missing)} (put their wheels in .whl/; "
             "see docs/gpu.md)")
print("found:", ", ".join(need))
EOF

# ------------------------------------------------ 2. dy2stat from this source tree
importable() {  # from a neutral folder, so the checkout itself is not on sys.path
    (cd "$WORK" && "$PY" -c 'import dy2stat, dy2stat.runtime, dy2stat.kernels' 2>/dev/null)
}

stage() {  # a copy laid out the way the installed package is
    local dst="$WORK/src"
    rm -rf "$dst" && mkdir -p "$dst" || return 1
    (cd "$ROOT" && tar --exclude=.git --exclude=.whl --exclude='__pycache__' \
        -cf - .) | (cd "$dst" && tar -xf -) || return 1
    rm -rf "$dst/dy2stat/runtime" "$dst/dy2stat/kernels"
    cp -r "$ROOT/runtime" "$dst/dy2stat/runtime" && cp -r "$ROOT/kernels" "$dst/dy2stat/kernels"
    export PYTHONPATH="$dst:$PYTHONPATH"
    RUN_DIR="$dst"
}

say "dy2stat (install mode: $MODE)"
RUN_DIR="$ROOT"
installed=0
if [ "$MODE" = auto ] || [ "$MODE" = pip ]; then
    if "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e "$ROOT" \
            && importable; then
        installed=1
        echo "editable install of $ROOT"
    elif [ "$MODE" = pip ]; then
        echo "pip install -e failed"; exit 2
    else
        echo "pip install -e did not give an importable dy2stat; staging a copy instead"
    fi
fi
if [ "$installed" = 0 ]; then
    stage || { echo "staging the sources failed"; exit 2; }
    importable || { echo "dy2stat is not importable from $RUN_DIR"; exit 2; }
    echo "staged copy in $RUN_DIR (PYTHONPATH=$PYTHONPATH)"
fi
cd "$RUN_DIR" || exit 2
"$PY" - <<'EOF'
import sys
import dy2stat as d2s
from dy2stat.kernels import backend, cudnn
print("python", sys.version.split()[0], "| dy2stat from", d2s.__file__)
print("cupy:", backend.cupy.__version__ if backend.has_cupy() else "not installed",
      "| GPU seen:", d2s.is_compiled_with_cuda(), "| cuDNN through CuPy:", cudnn.available())
EOF
if [ "$INSTALL_ONLY" = 1 ]; then
    echo "install only: run the tests with"
    echo "  cd $RUN_DIR && PYTHONPATH=$PYTHONPATH $PY -m pytest -m gpu tests"
    exit 0
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L

# ------------------------------------------------ 3. the gpu-marked tests
say "pytest -m gpu"
"$PY" -m pytest -m gpu tests -q -p no:cacheprovider --continue-on-collection-errors \
    -o addopts="" 2>&1 | tee "$OUT/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}

# ------------------------------------------------ 4. the benchmark
say "benchmarks/gpu_bench.py"
# shellcheck disable=SC2086  # BENCH_ARGS is a list of words
"$PY" benchmarks/gpu_bench.py --json "$OUT/gpu_bench.json" ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/gpu_bench.txt"
bench_rc=${PIPESTATUS[0]}

say "done: tests exit $tests_rc, benchmark exit $bench_rc (logs in $OUT)"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]

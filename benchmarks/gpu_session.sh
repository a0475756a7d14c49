#!/usr/bin/env bash
# One batched session on the GPU machine (device time is short; the machine
# forgets everything between leases): build gpufilt, run the CUDA tests, then
# the GPU, sweep, ops and CPU benchmarks. Logs, JSON and the charts go to $OUT
# (default /tmp/gpufilt-out).
#
#   bash benchmarks/gpu_session.sh [build] [wheel] [tests] [peers] [gpu] [sweep] [multigpu] [ops] [cpu]
#                                  (default: build tests gpu ops cpu)
#
#   build  pip install . for one architecture (ARCH, default 90)
#   wheel  the CUDA wheel (tools/build_wheels.sh cuda13x, every architecture),
#          timed, installed into a clean venv (the system's packages visible
#          for cupy, scipy and pytest, which the machine cannot download)
#          whose python the later steps use; auditwheel from $TOOL_WHEELS
#   peers  the peers' own filter tests against gpufilt: SciPy's (numpy and
#          cupy arrays, tests/test_scipy_suite.py) and CuPy's cupyx ones
#          (CUPYX_TESTS: CuPy's ndimage_tests/test_filters.py from its sdist,
#          default .whl/cupy-tests/test_filters.py; tests/cupyx_suite_plugin.py)
#   sweep  benchmarks/bench_sweep.py (SWEEP_ARGS, e.g. --quick)
#   multigpu  benchmarks/bench_multigpu.py on every GPU (MULTIGPU_ARGS; the
#          dask wheels from .whl/dask)
#
# Environment: ARCH (CUDA architecture, default 90), TESTS_TIMEOUT,
# GPU_TIMEOUT, OPS_TIMEOUT, CPU_TIMEOUT (seconds per step), GPU_CASES and
# OPS_CASES (comma-separated name filters), CUCIM_WHEELS (a folder of wheels
# installed with --no-deps into a private target when present, default .whl).
set -u
export PYTHONUNBUFFERED=1
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpufilt-out}
mkdir -p "$out"
steps=${*:-build tests gpu ops cpu}
# The python that has gpufilt: $PYTHON, else the wheel step's venv once it exists, else python3.
python=${PYTHON:-python3}
[ -z "${PYTHON:-}" ] && [ -x /tmp/gpufilt-venv/bin/python ] && python=/tmp/gpufilt-venv/bin/python
want() { [[ " $steps " == *" $1 "* ]]; }
say() { printf '\n=== %s [%ds]\n' "$*" "$SECONDS"; }

if want build; then
  say "build (sm_${ARCH:-90})"
  (cd "$root" && python3 -m pip install --no-build-isolation --no-deps -q -Cbuild-dir=/tmp/gpufilt-build \
      -Ccmake.define.CMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" .) > "$out/build.log" 2>&1 \
    || { tail -n 60 "$out/build.log"; exit 1; }
fi

if want wheel; then
  say "CUDA wheel (tools/build_wheels.sh cuda13x)"
  python3 -m pip install -q --no-index --no-deps --target /tmp/gpufilt-tools "${TOOL_WHEELS:-$root/.whl/tools}"/*.whl \
    > /dev/null 2>&1
  started=$SECONDS
  (cd "$root" && PYTHONPATH=/tmp/gpufilt-tools PATH="/tmp/gpufilt-tools/bin:$PATH" BUILD_ISOLATION=0 BUILD_DIR=/tmp/gpufilt-wheel-build WHEELHOUSE="$out/wheelhouse" \
      bash tools/build_wheels.sh cuda13x) > "$out/wheel.log" 2>&1 || { tail -n 60 "$out/wheel.log"; exit 1; }
  echo "wheel built and repaired in $((SECONDS - started)) s"; ls -l "$out/wheelhouse"
  cp /tmp/gpufilt-wheel-build/.ninja_log "$out/wheel.ninja_log"
  grep -E "gpufilt: |built in" "$out/wheel.log"
  python3 -m venv --system-site-packages /tmp/gpufilt-venv
  /tmp/gpufilt-venv/bin/python -m pip install -q --no-index --no-deps "$out"/wheelhouse/gpufilt_cuda13x-*.whl
  python=/tmp/gpufilt-venv/bin/python
  (cd /tmp && $python -c 'import gpufilt; print(gpufilt.__file__, gpufilt.info()["build"])')
fi

if want tests; then
  say "CUDA tests"
  # From outside the repository, so that the installed package is imported.
  (cd /tmp && timeout "${TESTS_TIMEOUT:-300}" $python -m pytest -q -n 8 -p no:benchmark -m cuda "$root/tests" \
      -p no:cacheprovider > "$out/tests.log" 2>&1)
  echo "pytest exit code $?"
  grep -E "passed|failed|error" "$out/tests.log" | tail -n 3
  grep -E "^(FAILED|ERROR)" "$out/tests.log" | head -n 20
fi

if want peers; then
  say "SciPy's filter tests on numpy and cupy arrays"
  (cd /tmp && SCIPY_ARRAY_API='["numpy", "cupy"]' timeout "${PEERS_TIMEOUT:-300}" \
      $python "$root/tests/test_scipy_suite.py" -p no:benchmark > "$out/scipy_suite.log" 2>&1)  # (not under xdist: scipy's markers)
  echo "exit code $?"; tail -n 1 "$out/scipy_suite.log"
  grep -E "^(FAILED|ERROR)" "$out/scipy_suite.log" | head -n 20
  cupyx_tests=${CUPYX_TESTS:-$root/.whl/cupy-tests/test_filters.py}
  if [ -f "$cupyx_tests" ]; then
    say "CuPy's cupyx filter tests"
    (cd /tmp && PYTHONPATH="$root/tests${PYTHONPATH:+:$PYTHONPATH}" timeout "${PEERS_TIMEOUT:-300}" \
        $python -m pytest -q -n 8 -p no:benchmark -p no:cacheprovider -p cupyx_suite_plugin "$cupyx_tests" \
        -rfEsx > "$out/cupyx_suite.log" 2>&1)
    echo "exit code $?"; tail -n 1 "$out/cupyx_suite.log"
    grep -E "^(FAILED|ERROR)" "$out/cupyx_suite.log" | head -n 20
  fi
fi

wheels=${CUCIM_WHEELS:-$root/.whl}
if want gpu && compgen -G "$wheels/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/gpufilt-site \
      "$wheels"/*.whl > /dev/null 2>&1 && export PYTHONPATH=/tmp/gpufilt-site
fi

if want gpu; then
  say "GPU filters benchmark"
  timeout "${GPU_TIMEOUT:-240}" $python "$root/benchmarks/bench_gpu.py" --cases "${GPU_CASES:-}" \
      --json "$out/gpu.json" --png "$out/gpu_speedup.png" 2>&1 | tee "$out/gpu.log" | grep -v '^\.\.\.'
fi

if want sweep; then
  say "parameter sweep against cupyx"
  timeout "${SWEEP_TIMEOUT:-480}" $python "$root/benchmarks/bench_sweep.py" ${SWEEP_ARGS:-} \
      --json "$out/sweep.json" --png "$out/sweep.png" 2>&1 | tee "$out/sweep.log" | tail -n 45
fi

if want multigpu; then
  say "several GPUs (dask-image, dask and zarr wheels: .whl/dask, installed into /tmp/gpufilt-dask)"
  python3 -m pip install -q --no-index --no-deps --target /tmp/gpufilt-dask "$root"/.whl/dask/*.whl > /dev/null 2>&1
  PYTHONPATH="/tmp/gpufilt-dask${PYTHONPATH:+:$PYTHONPATH}" timeout "${MULTIGPU_TIMEOUT:-420}" \
      $python "$root/benchmarks/bench_multigpu.py" ${MULTIGPU_ARGS:---host-repeats 0} --json "$out/multigpu.json" \
      2>&1 | tee "$out/multigpu.log" | tail -n 40
fi

if want ops; then
  say "ops benchmark"
  timeout "${OPS_TIMEOUT:-120}" $python "$root/benchmarks/bench_ops.py" ${OPS_CASES:+--only "$OPS_CASES"} \
      --json "$out/ops.json" 2>&1 | tee "$out/ops.log" | tail -n 30
fi

if want cpu; then
  say "CPU benchmark (1 thread and all cores)"
  timeout "${CPU_TIMEOUT:-180}" $python "$root/benchmarks/bench_cpu.py" --quick --threads 1,all \
      --json "$out/cpu.json" 2>&1 | tee "$out/cpu.log" | tail -n 40
fi
say "done"

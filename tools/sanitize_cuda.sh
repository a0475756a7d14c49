#!/usr/bin/env bash
# compute-sanitizer over the CUDA tests (the `cuda` marker) on a GPU machine
# with gpufilt installed: memcheck (out-of-bounds and misaligned accesses),
# racecheck (shared-memory hazards) and initcheck (reads of uninitialised
# device memory), one tool after the other.
#
# The selected tests are dealt out one by one to WORKERS shards
# (tools/pytest_shard.py), each one pytest process (no xdist) under its own
# compute-sanitizer, the shards spread round-robin over every visible GPU:
# every process writes its own log (%p: child processes too, such as the
# embedding test's program), and a shard none of whose logs ends with an
# ERROR SUMMARY counts as failed. (Under xdist with
# --target-processes all, only the controller's log came back: the workers
# ran under the tool, 4x slower, but their reports were lost.) On one H200,
# memcheck over 4903 of the ~6400 CUDA tests took 315 s with 16 xdist
# workers; a machine with several GPUs divides that.
#
#   bash tools/sanitize_cuda.sh [test files...]   (default: every tests/test_*.py with CUDA tests)
#
# Environment: TOOLS (default "memcheck racecheck initcheck"), WORKERS
# (shards, default 8 per GPU), GPUS (how many, default every one nvidia-smi
# lists), OUT (logs, default /tmp/gpufilt-sanitize), TOOL_TIMEOUT (seconds per
# tool, default 600), SHARDS (which shard indices to run, default all: to
# rerun the shards a timeout cut off). racecheck checks only gpufilt's own
# kernels (RACECHECK_KERNELS, default kns=gpufilt, the namespace of every
# gpufilt kernel): cuBLAS's matrix products in the stream tests' busy queue
# took minutes each under it. PYTEST_K: a pytest -k expression for every
# shard (e.g. "not slow_one", to run a test that alone outlasts
# TOOL_TIMEOUT in a call of its own). Prints each tool's error count; exits non-zero when any
# tool reports an error, a shard's tests fail or a shard leaves no summary.
set -u
out=${OUT:-/tmp/gpufilt-sanitize}
mkdir -p "$out"
sanitizer=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$sanitizer" ] || { echo "compute-sanitizer not found"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
files=()
if [ $# -eq 0 ]; then
  set -- $(grep -l "cuda" "$root"/tests/test_*.py)  # the files with CUDA tests
fi
for f in "$@"; do
  [ -f "$f" ] || { echo "not a test file: $f"; exit 2; }
  files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")  # absolute: the shards run from /tmp
done
gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")}
[ "$gpus" -ge 1 ] || gpus=1
shards=${WORKERS:-$((8 * gpus))}
failed=0
for tool in ${TOOLS:-memcheck racecheck initcheck}; do
  started=$SECONDS
  rm -f "$out/$tool".shard*
  pids=()
  only=()
  if [ "$tool" = racecheck ] && [ -n "${RACECHECK_KERNELS-kns=gpufilt}" ] \
      && "$sanitizer" --help 2>/dev/null | grep -q -- "--kernel-name "; then
    only=(--kernel-name "${RACECHECK_KERNELS-kns=gpufilt}")
  fi
  for s in ${SHARDS:-$(seq 0 $((shards - 1)))}; do
    # No --leak-check: CuPy's memory pool keeps its blocks until the process
    # ends, and memcheck reports each as a leak (2164 in one run, all CuPy's).
    # --report-api-errors no: the CUDA runtime's own probing of the driver
    # (cuGetProcAddress_v2, invalid value: 34 in one run) is no defect, and
    # gpufilt raises on every API error it meets (GF_CUDA_CHECK), which the
    # tests would show. From outside the checkout, so that the installed
    # package is imported. -v: a shard cut off by TOOL_TIMEOUT names the test
    # it was in.
    (cd /tmp && CUDA_VISIBLE_DEVICES=$((s % gpus)) GPUFILT_SHARD="$s/$shards" PYTHONPATH="$root/tools${PYTHONPATH:+:$PYTHONPATH}" \
        timeout "${TOOL_TIMEOUT:-600}" "$sanitizer" --tool "$tool" "${only[@]}" --print-limit 50 \
        --report-api-errors no --log-file "$out/$tool.shard$s.pid%p.log" \
        python3 -m pytest -v -m cuda -p no:cacheprovider -p no:benchmark -p no:xdist -p pytest_shard ${PYTEST_K:+-k "$PYTEST_K"} "${files[@]}" \
        > "$out/$tool.shard$s.pytest.log" 2>&1) &
    pids+=($!)
  done
  rc=0
  for pid in "${pids[@]}"; do
    wait "$pid"
    status=$?
    [ "$status" -eq 0 ] || [ "$status" -eq 5 ] || rc=1  # 5: no test selected (more shards than tests)
  done
  errors=0 missing=0 passed=0 failed_tests=0
  for s in ${SHARDS:-$(seq 0 $((shards - 1)))}; do
    summaries=$(cat "$out/$tool.shard$s".pid*.log 2>/dev/null | grep -E "(ERROR|RACECHECK) SUMMARY")
    if [ -z "$summaries" ]; then missing=$((missing + 1)); continue; fi
    # "ERROR SUMMARY: 5640 errors" or "RACECHECK SUMMARY: ... (0 errors, 0 warnings)"; not the
    # "ERROR SUMMARY: 5590 errors were not printed" line that follows a long report.
    for count in $(grep -oE "SUMMARY: [0-9]+ errors?$|\([0-9]+ errors?" <<< "$summaries" | grep -oE "[0-9]+"); do
      errors=$((errors + count))
    done
  done
  for log in "$out/$tool".shard*.pytest.log; do
    line=$(grep -E "passed|failed|error" "$log" | tail -n 1)
    passed=$((passed + $(grep -oE "[0-9]+ passed" <<< "$line" | grep -oE "[0-9]+" || echo 0)))
    failed_tests=$((failed_tests + $(grep -oE "[0-9]+ failed" <<< "$line" | grep -oE "[0-9]+" || echo 0)))
  done
  printf '%-10s %d shards on %d GPUs, %d passed, %d failed, %d errors reported, %d shards without a summary, %d s\n' \
    "$tool" "${#pids[@]}" "$gpus" "$passed" "$failed_tests" "$errors" "$missing" "$((SECONDS - started))"
  grep -h "^FAILED" "$out/$tool".shard*.pytest.log 2>/dev/null | head -n 20
  { [ "$rc" -ne 0 ] || [ "$errors" -ne 0 ] || [ "$missing" -ne 0 ]; } && failed=1
done
exit $failed

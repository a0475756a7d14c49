#!/usr/bin/env bash
# compute-sanitizer over the CUDA tests (the `cuda` marker) on a GPU machine
# with gpufilt installed: memcheck (out-of-bounds and misaligned accesses),
# racecheck (shared-memory hazards) and initcheck (reads of uninitialised
# device memory), one tool after the other. Each runs pytest's workers under
# the tool (--target-processes all; the GPU is shared). Under memcheck,
# three CUDA test files (1501 tests) took 138 s on an H200 with 12 workers:
# the whole suite needs a call per tool and part, not one 10-minute call.
#
#   bash tools/sanitize_cuda.sh [pytest paths or args...]   (default: tests)
#
# Environment: TOOLS (default "memcheck racecheck initcheck"), WORKERS
# (pytest-xdist workers, default 8), OUT (logs, default /tmp/gpufilt-sanitize),
# TOOL_TIMEOUT (seconds per tool, default 600). Prints each tool's error
# count; exits non-zero when any tool reports an error.
set -u
out=${OUT:-/tmp/gpufilt-sanitize}
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$sanitizer" ] || { echo "compute-sanitizer not found"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
args=("$@")
[ ${#args[@]} -gt 0 ] || args=("$root/tests")
failed=0
for tool in ${TOOLS:-memcheck racecheck initcheck}; do
  started=$SECONDS
  # No --leak-check: CuPy's memory pool keeps its blocks until the process
  # ends, and memcheck reports each as a leak (2164 in one run, all CuPy's).
  # From outside the checkout, so that the installed package is imported.
  (cd /tmp && timeout "${TOOL_TIMEOUT:-600}" "$sanitizer" --tool "$tool" --target-processes all \
      --print-limit 50 --log-file "$out/$tool.%p.log" \
      python3 -m pytest -q -n "${WORKERS:-8}" -m cuda -p no:cacheprovider -p no:benchmark "${args[@]}" \
      > "$out/$tool.pytest.log" 2>&1)
  rc=$?
  errors=$(cat "$out/$tool".*[0-9].log 2>/dev/null | grep -E "ERROR SUMMARY" | awk '{s += $4} END {print s + 0}')
  printf '%-10s pytest exit %s, %s errors in the logs of %s processes, %d s: %s\n' "$tool" "$rc" "$errors" \
    "$(grep -l "ERROR SUMMARY" "$out/$tool".*[0-9].log 2>/dev/null | wc -l)" "$((SECONDS - started))" \
    "$(grep -E "passed|failed" "$out/$tool.pytest.log" | tail -n 1)"
  { [ "$rc" -ne 0 ] || [ "$errors" -ne 0 ]; } && failed=1
done
exit $failed

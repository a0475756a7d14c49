#!/usr/bin/env bash
# The CPU module built with AddressSanitizer and UndefinedBehaviorSanitizer
# (CMake's GPUFILT_SANITIZE), and the tests that reach the C++ hardest run
# against it: the importer and argument checks (fuzzed), the hostile inputs,
# interop, errors, and every filter on numpy data. Any report fails the run.
#
#   bash tools/sanitize_cpu.sh [pytest args...]   (default: the subset below)
#
# CI runs it (.ci/run). Python itself is not instrumented: libasan is
# preloaded, leak checking is off (the interpreter keeps memory at exit), and
# an allocation over 3 GiB returns null (a MemoryError) instead of ending
# the run, as the tests' address-space limit would.
# Tests that set RLIMIT_AS skip themselves (ASan reserves terabytes of
# address space for its shadow); GPUFILT_SANITIZED=1 tells them.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
site=${SANITIZE_SITE:-$PWD/build/sanitize-site}
started=$SECONDS
rm -rf "$site"
GPUFILT_CUDA=OFF $python -m pip install -q --no-deps --target "$site" -Cbuild-dir=build/sanitize \
  -Ccmake.define.GPUFILT_SANITIZE=address,undefined . > build/sanitize-install.log 2>&1 \
  || { tail -n 60 build/sanitize-install.log; exit 1; }
echo "sanitized CPU build in $((SECONDS - started)) s"
asan=$(c++ -print-file-name=libasan.so)
[ -e "$asan" ] || { echo "no libasan.so next to c++ ($asan)"; exit 1; }
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests/test_reliability.py tests/test_fuzz_importer.py tests/test_interop.py
                                 tests/test_errors.py tests/test_filters_cpu.py tests/test_morphology.py)
cd tests  # the installed package, not the checkout's python/ folder
env PYTHONPATH="$site" GPUFILT_SANITIZED=1 LD_PRELOAD="$asan" \
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=3072:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  $python -m pytest -q -p no:cacheprovider "${tests[@]/#tests\//}"
echo "sanitized run took $((SECONDS - started)) s"

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
  -Ccmake.build-type=Debug -Ccmake.define.GPUFILT_SANITIZE=address,undefined . > build/sanitize-install.log 2>&1 \
  || { tail -n 60 build/sanitize-install.log; exit 1; }
echo "sanitized CPU build in $((SECONDS - started)) s"
# libstdc++ preloaded too: python is not linked with it, and ASan's
# interceptor of __cxa_throw fails a CHECK when it finds no real one.
asan=$(c++ -print-file-name=libasan.so)
stdcxx=$(c++ -print-file-name=libstdc++.so)
[ -e "$asan" ] || { echo "no libasan.so next to c++ ($asan)"; exit 1; }
tests=("$@")
# The default subset takes about a minute under the sanitizers on two cores
# (CI's budget); every CPU test file passes a path as an argument.
[ ${#tests[@]} -gt 0 ] || tests=(tests/test_reliability.py tests/test_fuzz_importer.py tests/test_interop.py
                                 tests/test_errors.py tests/test_filters_cpu.py tests/test_threads.py
                                 tests/test_scipy_behaviour.py tests/test_morphology.py tests/test_ops_array.py
                                 tests/test_ops_nn.py)
cd tests  # the installed package, not the checkout's python/ folder
run=(env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" GPUFILT_SANITIZED=1 LD_PRELOAD="$asan $stdcxx"
     ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=3072:abort_on_error=1
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$python")
"${run[@]}" -c "import gpufilt, sys; sys.exit(not gpufilt.__file__.startswith('$site'))" \
  || { echo "gpufilt is not imported from $site (an editable install's finder shadows PYTHONPATH)"; exit 1; }
"${run[@]}" -m pytest -q -p no:cacheprovider "${tests[@]/#tests\//}"
echo "sanitized run took $((SECONDS - started)) s"

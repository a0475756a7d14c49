#!/usr/bin/env bash
# First calls with a PTX-only build (the driver compiles each kernel from PTX
# for this GPU): a fresh driver cache, then the same cache again.
#   bash benchmarks/gpu_first_call.sh WHEEL   (writes $OUT/first_call.log)
set -u
out=${OUT:-/tmp/gpufilt-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
python3 -m pip install -q --no-index --no-deps --target /tmp/gpufilt-first-call "$1" > /dev/null
cache=$(mktemp -d)
for run in "empty driver cache" "cached"; do
  echo "== $run"
  CUDA_CACHE_PATH=$cache PYTHONPATH=/tmp/gpufilt-first-call python3 "$root/benchmarks/first_call.py"
done 2>&1 | tee "$out/first_call.log"
du -sh "$cache"

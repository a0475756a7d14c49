#!/usr/bin/env bash
# Builds gpufilt's wheels into wheelhouse/ (or $WHEELHOUSE), repaired with
# auditwheel into manylinux wheels:
#
#   tools/build_wheels.sh cpu       gpufilt-*.whl: the CPU kernels only
#   tools/build_wheels.sh cuda13x   gpufilt_cuda13x-*.whl: CPU and CUDA 13 kernels,
#                                   machine code for sm_75 to sm_120 and PTX
#
# Both wheels hold the same package, `gpufilt`: install one of them, as with
# cupy-cuda12x and cupy-cuda13x (`pip install gpufilt-cuda13x` on a GPU
# machine). The CUDA runtime is linked statically and the driver found at
# run time, so the CUDA wheel imports (and runs the CPU kernels) on machines
# without a GPU or driver.
#
# The wheel's platform tag is the oldest glibc the build machine's symbols
# allow: build inside a manylinux_2_28 image (cibuildwheel, whose settings are
# in pyproject.toml) for wheels that install on older distributions.
#
# Environment: PYTHON (default python3), WHEELHOUSE, CUDAARCHS (the CUDA
# wheel's architectures), BUILD_ISOLATION=0 to build with the build tools
# already installed (a machine without network), BUILD_DIR to keep the build
# folder (its .ninja_log times every unit).
set -euo pipefail

flavour=${1:-}
case "$flavour" in
  cpu|cuda13x) ;;
  *) echo "usage: $0 cpu|cuda13x" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
wheelhouse=$(mkdir -p "${WHEELHOUSE:-$root/wheelhouse}" && cd "${WHEELHOUSE:-$root/wheelhouse}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A copy of the sources (tracked and untracked, not ignored files), so that
# the CUDA wheel's distribution name can be set without touching the tree.
if git -C "$root" rev-parse --git-dir > /dev/null 2>&1; then
  (cd "$root" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$work"
else  # a copy of a checkout without its .git
  tar -C "$root" --exclude=./build --exclude=./wheelhouse --exclude=./.whl --exclude='./.venv*' -cf - . | tar -xf - -C "$work"
fi
src="$work"

pip_args=(wheel -v --no-deps -w "$work/raw" -Cbuild-dir="${BUILD_DIR:-$work/build}")
if [ "${BUILD_ISOLATION:-1}" = 0 ]; then
  pip_args+=(--no-build-isolation)
fi
if [ "$flavour" = cpu ]; then
  export GPUFILT_CUDA=OFF
else
  export GPUFILT_CUDA=ON
  # Every architecture CUDA 13 supports as machine code (sm_80's covers 8.7,
  # sm_100's 10.3 and sm_120's 12.1), and PTX for later GPUs; compiled from
  # one PTX a feature level (CMakeLists.txt, gpufilt_cuda_generate_code):
  # compute_75 for sm_75, compute_80 for sm_80 to sm_90, compute_100 for
  # sm_100 and sm_120 (and the PTX it carries).
  export CUDAARCHS=${CUDAARCHS:-75-real;80-real;86-real;89-real;90-real;100-real;120}
  sed -i 's/^name = "gpufilt"$/name = "gpufilt-cuda13x"/' "$src/pyproject.toml"
  grep -q '^name = "gpufilt-cuda13x"$' "$src/pyproject.toml" || { echo "pyproject.toml: name not set" >&2; exit 1; }
fi

started=$SECONDS
"$python" -m pip "${pip_args[@]}" "$src"
echo "built in $((SECONDS - started)) s"
"$python" -m auditwheel repair -w "$wheelhouse" "$work"/raw/*.whl
ls -l "$wheelhouse"

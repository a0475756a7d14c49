"""gpufilt.info(), `python -m gpufilt info`, gpufilt.CudaError and the public names."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpufilt
from gpufilt import _core

from _helpers import CUDA_BUILT, CUDA_USABLE


@pytest.fixture(scope="module")
def facts():
    return gpufilt.info()


def test_info_has_documented_keys(facts):
    assert {"version", "build", "cuda", "libraries"} <= set(facts)
    assert {"cuda", "openmp"} <= set(facts["build"])
    assert {"usable", "unusable_reason", "devices"} <= set(facts["cuda"])


def test_info_reports_the_cpu_kernels_vector_instructions(facts):
    levels = ["baseline", "avx2", "avx512"]
    assert facts["cpu"]["isa"] in levels
    assert levels.index(facts["cpu"]["isa"]) <= levels.index(facts["cpu"]["isa_supported"])


def test_gpufilt_cpu_isa_caps_the_cpu_kernels():
    code = "import gpufilt; print(gpufilt.info()['cpu']['isa'])"
    env = dict(os.environ, GPUFILT_CPU_ISA="baseline")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "baseline"


def test_setting_an_unknown_cpu_isa_raises_and_keeps_the_cap():
    before = gpufilt.info()["cpu"]["isa"]
    with pytest.raises(ValueError, match="isa must be 'baseline', 'avx2' or 'avx512'"):
        _core._set_cpu_isa("sse9")
    assert gpufilt.info()["cpu"]["isa"] == before


def test_info_version_is_the_package_version(facts):
    assert facts["version"] == gpufilt.__version__


def test_info_build_and_runtime_agree_with_the_extension_modules(facts):
    assert facts["build"]["cuda"] is CUDA_BUILT
    assert facts["cuda"]["usable"] is CUDA_USABLE
    if not CUDA_USABLE:
        assert isinstance(facts["cuda"]["unusable_reason"], str)
        assert facts["cuda"]["unusable_reason"]
    else:
        assert facts["cuda"]["devices"]


def test_info_reports_numpy_version(facts):
    assert facts["libraries"]["numpy"] == np.__version__


def test_command_line_info_prints_json_and_a_device_line():
    run = subprocess.run([sys.executable, "-m", "gpufilt", "info"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    body, _, last = run.stdout.rstrip().rpartition("\n\n")
    assert json.loads(body)["version"] == gpufilt.__version__
    assert ("usable CUDA device" in last) if CUDA_USABLE else last.startswith("no usable CUDA device")


@pytest.mark.parametrize("variable", ["GPUFILT_NUM_THREADS", "OMP_NUM_THREADS"])
def test_thread_count_follows_the_environment(variable):
    if not gpufilt.info()["build"]["openmp"]:
        pytest.skip("built without OpenMP: one thread")
    code = "import gpufilt; print(gpufilt.info()['build']['cpu_threads'])"
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("GPUFILT_NUM_THREADS", "OMP_NUM_THREADS")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(env, **{variable: "3"}))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "3"


def test_cuda_error_is_a_runtime_error_with_details():
    err = gpufilt.CudaError("cudaErrorMemoryAllocation: out of memory",
                            name="cudaErrorMemoryAllocation", code=2, file="src/cuda/x.cu", line=10)
    assert isinstance(err, RuntimeError)
    assert (err.name, err.code, err.file, err.line) == ("cudaErrorMemoryAllocation", 2,
                                                         "src/cuda/x.cu", 10)
    assert "out of memory" in str(err)


@pytest.mark.parametrize("name", ["correlate1d", "convolve1d", "gaussian_filter1d",
                                  "gaussian_filter", "uniform_filter1d", "uniform_filter"])
def test_filter_signature_matches_scipy(name):
    import inspect

    from scipy import ndimage

    ours = inspect.signature(getattr(gpufilt.ndimage, name)).parameters
    theirs = inspect.signature(getattr(ndimage, name)).parameters
    assert list(ours)[: len(theirs)] == list(theirs)
    for p in theirs.values():
        assert (ours[p.name].kind, ours[p.name].default) == (p.kind, p.default), p.name
    assert ours["stream"].kind is inspect.Parameter.KEYWORD_ONLY

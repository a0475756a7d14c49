"""pytest configuration: the `cuda` marker skips tests unless a CUDA device
is usable; shared fixtures. Data and tolerance helpers are in _helpers.py."""
from __future__ import annotations

import os

import numpy as np
import pytest

from gpufilt import _dispatch

from _helpers import CUDA_USABLE

SEED = 20261123

# jax would otherwise take 75% of GPU memory when its GPU backend starts.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


# ------------------------------------------------------------------ markers


def pytest_collection_modifyitems(config, items):
    if CUDA_USABLE:
        return
    reason = _dispatch._cuda_error if _dispatch._cuda is None else _dispatch._cuda.unusable_reason()
    skip = pytest.mark.skip(reason=f"no usable CUDA device: {reason}")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


# ----------------------------------------------------------------- fixtures


@pytest.fixture
def rng():
    """A fixed-seed generator: random data, reproducible failures."""
    return np.random.default_rng(SEED)


def _cpu_isas():
    """The vector instruction sets whose copies of the CPU kernels run here
    (core/cpu_isa.hpp): every level up to the widest this CPU supports."""
    from gpufilt import _core
    levels = ["baseline", "avx2", "avx512"]
    return levels[:levels.index(_core.cpu_isa_info()["isa_supported"]) + 1]


@pytest.fixture(params=_cpu_isas())
def cpu_isa(request):
    """Runs a test with the CPU kernels capped at each level in turn, so
    that every compiled copy of them is checked on this machine."""
    from gpufilt import _core
    before = _core._set_cpu_isa(request.param)
    yield request.param
    _core._set_cpu_isa(before)


@pytest.fixture
def jax_gpu():
    """(jax, its first GPU device); skips without jax or a jax GPU."""
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("jax has no GPU device")
    return jax, gpus[0]

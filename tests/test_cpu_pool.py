"""The CPU result pool (src/core/host_pool.hpp, module_core.cpp new_result):
results of at least POOL_MIN_BYTES live on pooled blocks; a block is handed
out again only once every array on it is dropped; GPUFILT_CPU_POOL_BYTES
caps what is kept; gpufilt.free_cpu_pool() returns it all."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage as snd

import gpufilt
from gpufilt import _core
from gpufilt import ndimage as gnd

from _helpers import assert_matches

# Over the pool's threshold in float32 (by a few rows), so that every result here is pooled.
SHAPE = (2, _core.POOL_MIN_BYTES // 4096 + 64, 512)

# name, positional arguments, keyword arguments
CALLS = [
    ("uniform_filter", (3,), {}),
    ("median_filter", (3,), {}),
    ("gaussian_filter", (1.0,), {"output": np.float64}),
    ("sobel", (1,), {}),
    ("maximum_filter1d", (4,), {"axis": 2}),
]


def address(a):
    return a.__array_interface__["data"][0]


def free_bytes():
    return gpufilt.info()["cpu"]["pool"]["free_bytes"]


@pytest.fixture
def volume(rng):
    gpufilt.free_cpu_pool()
    yield rng.random(SHAPE, dtype=np.float32)
    gpufilt.free_cpu_pool()


@pytest.mark.parametrize("name,args,kwargs", CALLS)
def test_pooled_result_is_a_writable_contiguous_numpy_array_with_scipy_values(name, args, kwargs, volume):
    result = getattr(gnd, name)(volume, *args, **kwargs)
    assert type(result) is np.ndarray
    assert result.nbytes >= _core.POOL_MIN_BYTES
    assert not result.flags.owndata  # a view of its pooled block
    assert result.flags.c_contiguous and result.flags.writeable and result.flags.aligned
    assert_matches(result, getattr(snd, name)(volume, *args, **kwargs))
    result[...] = 1  # writable all through
    assert np.all(result == 1)


def test_dropped_result_block_is_reused_and_live_ones_never(volume):
    first = gnd.uniform_filter(volume, 3)
    second = gnd.uniform_filter(volume, 3)  # first is alive: another block
    assert address(first) != address(second)
    kept = address(first)
    expected = first.copy()
    first[...] = np.nan  # what the block holds until the next result overwrites it
    del first
    assert free_bytes() >= volume.nbytes
    third = gnd.uniform_filter(volume, 3)
    assert address(third) == kept
    assert free_bytes() == 0
    assert np.array_equal(third, expected)  # all of it rewritten


def test_a_view_keeps_its_block_out_of_the_pool(volume):
    result = gnd.uniform_filter(volume, 3)
    view = result[1, ::2]
    kept = address(result)
    snapshot = view.copy()
    del result
    assert free_bytes() == 0
    other = gnd.uniform_filter(volume * 2, 3)
    assert address(other) != kept
    assert np.array_equal(view, snapshot)  # untouched by the later result


def test_free_cpu_pool_returns_the_free_blocks(volume):
    gnd.uniform_filter(volume, 3)  # dropped at once
    assert free_bytes() >= volume.nbytes
    gpufilt.free_cpu_pool()
    assert free_bytes() == 0


def test_small_results_are_plain_numpy_arrays(rng):
    x = rng.random((16, 16), dtype=np.float32)
    result = gnd.uniform_filter(x, 3)
    assert result.flags.owndata
    assert_matches(result, snd.uniform_filter(x, 3))


@pytest.mark.parametrize("limit,kept", [("0", False), (str(1 << 30), True)])
def test_gpufilt_cpu_pool_bytes_caps_what_is_kept(limit, kept):
    code = ("import numpy as np, gpufilt; from gpufilt import ndimage as g; "
            f"g.uniform_filter(np.ones({SHAPE}, np.float32), 3); "
            "print(gpufilt.info()['cpu']['pool']['free_bytes'])")
    env = dict(os.environ, GPUFILT_CPU_POOL_BYTES=limit)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert (int(run.stdout) > 0) is kept


def test_a_larger_free_block_serves_a_slightly_smaller_result(volume):
    big = gnd.uniform_filter(volume, 3)
    kept = address(big)
    del big
    smaller = volume[:, :-8]  # a few rows fewer: fits the same block
    result = gnd.uniform_filter(smaller, 3)
    assert address(result) == kept
    assert_matches(result, snd.uniform_filter(smaller, 3))


def test_over_the_limit_the_oldest_free_blocks_go_first(volume):
    code = ("import numpy as np, gpufilt; from gpufilt import ndimage as g; "
            f"x = np.ones({SHAPE}, np.float32); a = g.uniform_filter(x, 3); b = g.uniform_filter(x, 5); "
            "keep = b.__array_interface__['data'][0]; del a; del b; "
            "c = g.uniform_filter(x, 7); print(c.__array_interface__['data'][0] == keep, "
            "gpufilt.info()['cpu']['pool']['free_bytes'])")
    one_block = -(-volume.nbytes // (2 << 20)) * (2 << 20)
    env = dict(os.environ, GPUFILT_CPU_POOL_BYTES=str(one_block))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    reused, free = run.stdout.split()
    assert reused == "True" and int(free) == 0  # a's block went when b's came back


@pytest.mark.parametrize("name,value", [("GPUFILT_CPU_ISA", "sse9"), ("GPUFILT_CPU_POOL_BYTES", "1G")])
def test_unknown_environment_values_warn_at_import(name, value):
    code = "import warnings; warnings.simplefilter('error'); import gpufilt"
    env = dict(os.environ, **{name: value})
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode != 0 and name in run.stderr


@pytest.mark.parametrize("shape", [(-1, 3), (2**40, 2**40, 2**20)])
def test_the_result_allocator_refuses_the_shapes_numpy_refuses(shape):
    with pytest.raises(ValueError) as want:
        np.empty(shape, np.float32)
    with pytest.raises(ValueError, match=str(want.value)[:20]):
        _core.empty(shape, np.dtype(np.float32))


def test_the_result_allocator_pools_only_large_arrays():
    small = _core.empty((4, 5), np.dtype(np.int16))
    large = _core.empty(SHAPE, np.dtype(np.float32))
    assert (small.shape, small.dtype, small.flags.owndata) == ((4, 5), np.int16, True)
    assert (large.shape, large.dtype, large.flags.owndata) == (SHAPE, np.float32, False)
    assert large.flags.c_contiguous and large.flags.writeable

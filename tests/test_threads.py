"""The filters' `threads=`: the CPU threads of one call, for that call and
that Python thread only, on top of GPUFILT_NUM_THREADS / OMP_NUM_THREADS.
Results are scipy's whatever the count; bad counts raise before any work."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gpufilt import _core
from gpufilt import ndimage as gnd

from _helpers import assert_matches
from test_filters_nd import FUNCTIONS, call, data, filter_args, needs_signed_output, reference


def call_threads():
    """This thread's override now (0: none), left as it was."""
    before = _core._set_call_threads(0)
    _core._set_call_threads(before)
    return before


@pytest.mark.parametrize("shape", [(48, 1000), (24, 40, 50)])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_any_thread_count_gives_scipy_results(name, threads, shape, rng):
    # Large enough (over 32768 elements) for the OpenMP paths and the chains.
    x = data(rng, shape, "float32", name)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if needs_signed_output(name, x.dtype):
        kwargs["output"] = np.int32
    got = call(gnd, name, x, *args, threads=threads, **kwargs)
    assert_matches(got, reference(name, x, *args, **kwargs), err_msg=name)
    assert call_threads() == 0  # back to the default after the call


@pytest.mark.parametrize("threads", [2, 5])
def test_the_kernels_see_the_count_during_the_call(threads, rng):
    # A derivative callback runs inside generic_laplace's call, on its thread.
    seen = []

    def derivative2(input, axis, output, mode, cval):
        seen.append(_core.build_info()["cpu_threads"])
        return gnd.correlate1d(input, [1.0, -2.0, 1.0], axis, output, mode, cval)

    gnd.generic_laplace(rng.random((20, 30)), derivative2, threads=threads)
    assert seen == [threads, threads]
    assert call_threads() == 0


def test_the_count_is_per_python_thread(rng):
    # Two calls in flight at once on two Python threads, each with its own
    # count: each callback waits at the barrier until the other call is in.
    x = rng.random((64, 600))
    barrier = threading.Barrier(2, timeout=60)
    seen = {1: set(), 3: set()}

    def run(threads):
        def derivative2(input, axis, output, mode, cval):
            barrier.wait()
            seen[threads].add(_core.build_info()["cpu_threads"])
            return gnd.correlate1d(input, [1.0, -2.0, 1.0], axis, output, mode, cval)

        gnd.generic_laplace(x, derivative2, threads=threads)

    workers = [threading.Thread(target=run, args=(n,)) for n in seen]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert seen == {1: {1}, 3: {3}}


def test_the_default_comes_back_after_an_error(rng):
    x = rng.random((6, 7))
    with pytest.raises(ValueError):
        gnd.uniform_filter(x, 3, mode="bogus", threads=2)
    assert call_threads() == 0


@pytest.mark.parametrize("bad,error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                       ("2", TypeError)])
def test_a_bad_count_raises_naming_threads(bad, error, rng):
    x = rng.random((6, 7))
    out = np.zeros_like(x)
    with pytest.raises(error, match="threads must be a positive integer"):
        gnd.gaussian_filter(x, 1.0, output=out, threads=bad)
    assert not out.any()

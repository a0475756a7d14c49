"""Hostile calls end in a Python exception or scipy's result, never in a
crash, an abort or a write the caller did not ask for (issue 32). Each runs
in a child process: a segfault, an abort or libgomp ending the process fails
the test instead of the run. Where memory matters the child runs under an
address-space limit (RLIMIT_AS), so that a regression cannot take the
machine's memory."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import gpufilt
import pytest

# The child's prelude: the gpufilt under test (the parent's), a memory cap,
# and `done(outcome)`, the last line a passing child prints.
# Under tools/sanitize_cpu.sh (GPUFILT_SANITIZED) ASan's shadow memory needs
# terabytes of address space: no RLIMIT_AS there; ASan's own cap on one
# allocation (max_allocation_size_mb) stands in for it.
PRELUDE = """
import os, resource, sys
if {limit} and not os.environ.get("GPUFILT_SANITIZED"):
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
import numpy as np
import scipy.ndimage as sp
import gpufilt
import gpufilt.ndimage as gnd
import gpufilt.ops as ops
assert gpufilt.__file__ == {file!r}, gpufilt.__file__

def raises(error, call, match):
    try:
        call()
    except error as e:
        assert match in str(e), (match, str(e))
        return
    raise AssertionError(f"no {{error.__name__}}")

def done(outcome="ok"):
    print("DONE", outcome)
"""

GB = 1 << 30

# ASan's operator new ends the process where it cannot allocate (it cannot
# throw std::bad_alloc): the paths from bad_alloc to MemoryError are tested
# without it.
needs_bad_alloc = pytest.mark.skipif(bool(os.environ.get("GPUFILT_SANITIZED")),
                                     reason="under ASan, a failed operator new ends the process")


def run_child(code, limit=0, env=None, setup="", timeout=60):
    """Runs `code` after PRELUDE and `setup` in a fresh interpreter; returns
    its last line of output after checking it ended normally and printed
    DONE."""
    source = PRELUDE.format(limit=limit, file=gpufilt.__file__) + setup + textwrap.dedent(code)
    child_env = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=timeout, env=child_env)
    assert p.returncode == 0, f"child exited with {p.returncode}:\n{p.stdout}\n{p.stderr[-3000:]}"
    lines = p.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("DONE"), p.stdout + p.stderr
    return lines[-1][5:]


# ------------------------------------------------------------- out of memory


@needs_bad_alloc
@pytest.mark.parametrize("threads", [None, 1])
def test_memory_exhaustion_is_a_memory_error_not_an_abort(threads):
    # 8 GB of extended line per thread under a 3 GB limit: std::bad_alloc
    # inside the OpenMP region (threads=1 is a region too) used to abort.
    run_child(f"""
        x = np.arange(256 * 256.0).reshape(256, 256)
        before = x.copy()
        out = np.full_like(x, -1.0)
        raises(MemoryError, lambda: gnd.uniform_filter1d(x, 10**9, output=out, threads={threads}), "memory")
        assert (x == before).all() and (out == -1.0).all()
        # the process is still usable afterwards
        assert np.allclose(gnd.uniform_filter1d(x, 3, threads={threads}), sp.uniform_filter1d(x, 3))
        done()
    """, limit=3 * GB)



@needs_bad_alloc
def test_one_threads_failed_buffers_leave_the_output_untouched():
    # Two threads, memory for one thread's 1.2 GB extended line: one thread
    # gets its buffers, the other cannot. No loop starts its first task before
    # every thread of the team has its buffers (parallel.hpp: all_ready), so
    # the thread that got them writes nothing either; without that, whether
    # it had written its first rows depended on which thread allocated first.
    run_child("""
        def address_space():
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
        gnd.uniform_filter1d(np.ones((512, 512)), 3, threads=2)  # the thread team exists
        limit = address_space() + 1_700_000_000
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        x = np.ones((256, 256))
        out = np.full_like(x, -1.0)
        raises(MemoryError, lambda: gnd.uniform_filter1d(x, 150_000_001, output=out, threads=2), "memory")
        assert (out == -1.0).all() and (x == 1.0).all()
        done()
    """)

def test_a_window_no_memory_can_hold_is_a_memory_error():
    run_child("""
        x = np.ones((4, 5))
        raises(MemoryError, lambda: gnd.uniform_filter1d(x, 2**62), "memory")  # (scipy 1.17.1 segfaults)
        assert (x == 1).all()
        done()
    """, limit=3 * GB)


def test_a_huge_minimum_window_needs_memory_of_the_line_only():
    # scipy raises MemoryError; the window reaches past every repetition of
    # the extension, so the result is that of a window of 2n a side.
    run_child("""
        rng = np.random.default_rng(1)
        x = rng.random((256, 256))
        for mode in ["reflect", "mirror", "wrap", "nearest", "constant"]:
            got = gnd.minimum_filter1d(x, 10**9, mode=mode, cval=0.25)
            assert (got == sp.minimum_filter1d(x, 4 * 256 + 1, mode=mode, cval=0.25)).all(), mode
            got = gnd.maximum_filter1d(x, 10**9, axis=0, origin=-400, mode=mode, cval=0.25)
            assert (got == sp.maximum_filter1d(x, 4 * 256 + 1, axis=0, mode=mode, cval=0.25)).all(), mode
        done()
    """, limit=2 * GB)


def test_windows_larger_than_the_array_take_scipys_memory():
    # A 1000 x 1000 median on a 4 x 5 array had taken 512 bytes a tap a
    # thread (1 GB here); a size-10**7 mean 5 lanes of extended line. (scipy
    # 1.17.1's median differs here from the definition, which the brute force
    # below follows: it reflects the array once, not as often as the window
    # needs.)
    run_child("""
        rng = np.random.default_rng(2)
        x = rng.random((4, 5))
        k = 1000
        got = gnd.median_filter(x, footprint=np.ones((k, k), bool), threads=2)
        padded = np.pad(x, k, mode="symmetric")  # scipy's "reflect", repeated
        for i, j in [(0, 0), (3, 4)]:
            window = padded[k + i - k // 2:][:k, k + j - k // 2:][:, :k]
            assert got[i, j] == np.partition(window.ravel(), k * k // 2)[k * k // 2]
        got = gnd.uniform_filter(x, size=10**7, threads=2)
        assert np.allclose(got, sp.uniform_filter(x, size=10**7))
        done()
    """, limit=GB)


# ------------------------------------------------------------ foreign memory


# A DLPack producer exporting what it is told to (_core.dlpack_capsule: the
# capsule ExternalArray makes).
PRODUCER = """
from gpufilt import _core
class Producer:
    def __init__(self, keep, ptr, shape, strides, version=1):
        self.args = (keep, ptr, list(shape), list(strides), 2, 64, 1, 0, False, version)
    def __dlpack_device__(self):
        return (1, 0)
    def __dlpack__(self, stream=None, max_version=None, copy=None):
        return _core.dlpack_capsule(*self.args)
"""


def test_a_dlpack_capsule_with_a_null_pointer_is_refused():
    run_child(setup=PRODUCER, code="""
        keep = np.zeros(1)
        for version in (-1, 1):
            bad = Producer(keep, 0, [4, 5], [], version)
            raises(ValueError, lambda: gnd.uniform_filter(bad, 3), "null data pointer")
            raises(ValueError, lambda: gpufilt.describe(bad.__dlpack__()), "null data pointer")
        empty = Producer(keep, 0, [0, 5], [])
        assert gnd.uniform_filter(empty, 3).shape == (0, 5)  # no elements: no pointer needed
        done()
    """)


def test_dlpack_strides_whose_bytes_overflow_are_refused():
    run_child(setup=PRODUCER, code="""
        a = np.arange(20.0)
        for strides in ([2**61, 1], [1, 2**60], [-(2**61), 1]):
            bad = Producer(a, a.ctypes.data, [4, 5], strides)
            raises(ValueError, lambda: gnd.uniform_filter(bad, 3), "overflow 64 bits")
            raises(ValueError, lambda: gnd.uniform_filter(a.reshape(4, 5), 3, output=bad), "overflow 64 bits")
        # element strides that fit, but whose reach does not
        bad = Producer(a, a.ctypes.data, [4, 5], [2**59, 1])
        raises(ValueError, lambda: gnd.uniform_filter(bad, 3), "strides")
        assert (a == np.arange(20.0)).all()
        done()
    """)


def test_from_pointer_strides_beyond_64_bits_are_refused_by_the_filters():
    run_child("""
        a = np.arange(20.0)
        out = np.zeros((4, 5))
        for strides in [(2**63 - 8, 8), (8, 2**62), (-(2**62), 8)]:
            view = gpufilt.from_pointer(a.ctypes.data, (4, 5), "f8", strides=strides, owner=a)
            raises((ValueError, TypeError), lambda: gnd.uniform_filter(view, 3, output=out), "")
            raises((ValueError, TypeError), lambda: gnd.uniform_filter(out, 3, output=view), "")
            raises((ValueError, TypeError), lambda: ops.relu(out, out=view), "")
        assert (a == np.arange(20.0)).all() and not out.any()
        done()
    """)


def test_a_cuda_array_interface_with_a_null_pointer_or_wrapping_strides_is_refused():
    run_child("""
        class Cai:
            def __init__(self, ptr, strides):
                self.__cuda_array_interface__ = {"shape": (4, 5), "typestr": "<f8", "data": (ptr, False),
                                                 "strides": strides, "version": 3}
        raises(ValueError, lambda: gpufilt.describe(Cai(0, None)), "null data pointer")
        raises(ValueError, lambda: gpufilt.describe(Cai(2**40, (2**62, 8))), "overflow")
        raises(ValueError, lambda: gpufilt.describe(Cai(2**40, (-(2**41), 8))), "address space")
        raises(ValueError, lambda: gpufilt.describe(Cai(-16, (8 * 5, 8))), "address space")  # wraps
        done()
    """)


# --------------------------------------------------- outputs no filter can write


def test_outputs_whose_elements_overlap_are_refused():
    run_child("""
        from numpy.lib.stride_tricks import as_strided
        x = np.arange(600.0).reshape(20, 30)
        base = np.zeros(40)
        outputs = [as_strided(base[:1], (20, 30), (0, 0)),   # one element
                   as_strided(base, (20, 30), (0, 8)),       # rows on one another
                   as_strided(base, (5, 6), (8, 8)),         # interleaved
                   as_strided(base, (5, 6), (16, -8))[:, ::-1]]
        calls = [lambda o: gnd.uniform_filter(x[:o.shape[0], :o.shape[1]], 3, output=o),
                 lambda o: gnd.median_filter(x[:o.shape[0], :o.shape[1]], 3, output=o),
                 lambda o: gnd.gaussian_filter(x[:o.shape[0], :o.shape[1]], 1.0, output=o),
                 lambda o: gnd.minimum_filter1d(x[:o.shape[0], :o.shape[1]], 3, output=o)]
        for o in outputs:
            for call in calls:
                raises(ValueError, lambda: call(o), "output has elements that overlap")
            xs = x[:o.shape[0], :o.shape[1]]
            raises(ValueError, lambda: ops.relu(xs, out=o), "out has elements that overlap")
            raises(ValueError, lambda: ops.softmax(xs, out=o), "out has elements that overlap")
            raises(ValueError, lambda: ops.broadcast_to(xs[:1], out=o), "out has elements that overlap")
            raises(ValueError, lambda: ops.add(xs, xs, out=o), "out has elements that overlap")
        row = as_strided(base[:1], (20,), (0,))
        raises(ValueError, lambda: ops.sum(x, axis=1, out=row), "out has elements that overlap")
        # morphology whose last step the input's library writes (output[...] =): refused before it computes
        flags = np.zeros(40, bool)
        for o in [as_strided(flags[:1], (20, 30), (0, 0)), as_strided(flags, (5, 6), (1, 1))]:
            image = x[:o.shape[0], :o.shape[1]] > 300
            for call in [lambda: gnd.binary_erosion(image, output=o), lambda: gnd.binary_closing(image, output=o),
                         lambda: gnd.binary_fill_holes(image, output=o)]:
                raises(ValueError, call, "output has elements that overlap")
        raises(ValueError, lambda: gnd.grey_erosion(x, structure=np.ones((3, 3)), output=outputs[0]),
               "output has elements that overlap")
        assert not base.any() and not flags.any() and (x == np.arange(600.0).reshape(20, 30)).all()
        done()
    """)


def test_outputs_that_overlap_the_input_or_skip_memory_still_work():
    run_child("""
        x = np.arange(600.0).reshape(20, 30)
        expected = sp.uniform_filter(x, 3)
        y = x.copy()
        assert np.allclose(gnd.uniform_filter(y, 3, output=y), expected)          # in place
        y = x.copy()
        assert np.allclose(gnd.uniform_filter(y[::-1], 3, output=y), expected[::-1])  # reversed view
        big = np.zeros((40, 60))
        assert np.allclose(gnd.uniform_filter(x, 3, output=big[::2, ::-2]), expected)
        assert np.allclose(big[::2, ::-2], expected) and not big[1::2].any()
        one = np.zeros(1)
        assert gnd.uniform_filter(np.ones(1), 3, output=np.lib.stride_tricks.as_strided(one, (1,), (0,)))[0] == 1
        empty = np.lib.stride_tricks.as_strided(one, (0, 5), (0, 0))
        assert gnd.uniform_filter(np.ones((0, 5)), 3, output=empty).shape == (0, 5)
        done()
    """)


# ------------------------------------------------------------------- threads


def test_huge_thread_counts_are_capped_not_fatal():
    # threads=1000 under a memory limit (1000 thread stacks) and 10**6 had
    # made libgomp end the process.
    run_child("""
        from gpufilt import _core
        x = np.random.default_rng(3).random((400, 400))
        expected = sp.uniform_filter(x, 3)
        for threads in (1000, 10**6, 10**20):
            assert np.allclose(gnd.uniform_filter(x, 3, threads=threads), expected)
        seen = []
        def derivative2(input, axis, output, mode, cval):
            seen.append(_core.build_info()["cpu_threads"])
            return gnd.correlate1d(input, [1.0, -2.0, 1.0], axis, output, mode, cval)
        gnd.generic_laplace(x, derivative2, threads=10**6)
        assert 1 <= seen[0] <= 4 * len(__import__("os").sched_getaffinity(0)), seen
        for bad, error in [(0, ValueError), (-1, ValueError), (2.0, TypeError), ("4", TypeError)]:
            raises(error, lambda: gnd.uniform_filter(x, 3, threads=bad), "threads must be a positive integer")
        done()
    """, limit=2 * GB)


@pytest.mark.parametrize("variable", ["GPUFILT_NUM_THREADS", "OMP_NUM_THREADS"])
def test_huge_thread_counts_from_the_environment_are_capped(variable):
    out = run_child("""
        from gpufilt import _core
        x = np.random.default_rng(4).random((400, 400))
        assert np.allclose(gnd.uniform_filter(x, 3), sp.uniform_filter(x, 3))
        done(_core.build_info()["cpu_threads"])
    """, limit=2 * GB, env={variable: "100000"})
    assert 1 <= int(out) <= 4 * len(os.sched_getaffinity(0))

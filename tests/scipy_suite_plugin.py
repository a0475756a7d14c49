"""A pytest plugin that runs SciPy's own tests against gpufilt.

SciPy's ``scipy/ndimage/tests/test_filters.py``, ``test_morphology.py`` and
``test_fourier.py`` call every function as ``ndimage.<name>``. With this
plugin loaded (``-p scipy_suite_plugin``, tests/ on the path) those names in
``scipy.ndimage`` are gpufilt's functions, so SciPy's tests, values,
exception types and messages become the oracle of gpufilt's. A function
gpufilt does not provide is replaced by one that raises `NotProvided`, a
pytest skip that names it: those tests count neither as passes nor as
failures.

tests/test_scipy_suite.py runs the suite with this plugin in a child
process; ``python tests/test_scipy_suite.py`` prints the whole report. On a
GPU machine, ``SCIPY_ARRAY_API='["numpy", "cupy"]'`` adds SciPy's cupy cases
(benchmarks/gpu_session.sh's ``peers`` step).
"""
from __future__ import annotations

import pytest
import scipy.ndimage
import scipy.ndimage._filters
import scipy.ndimage._fourier
import scipy.ndimage._morphology

import gpufilt.ndimage


class NotProvided(pytest.skip.Exception):
    """A SciPy function that gpufilt.ndimage does not provide was called: the
    test is skipped, naming it (a pytest skip, so that no failure report is
    built for it, and cupy.testing, which catches Exception, lets it through)."""


def _not_provided(name):
    def missing(*args, **kwargs):
        raise NotProvided(f"not provided: gpufilt.ndimage does not provide {name}")
    missing.__name__ = name
    return missing


def _with_cupy(capabilities):
    """SciPy's capabilities of a function, cupy arrays included: gpufilt
    takes them wherever scipy's function runs only on the CPU."""
    capabilities = dict(capabilities)
    if capabilities.get("cpu_only"):
        capabilities["exceptions"] = sorted({*capabilities.get("exceptions", ()), "cupy"})
    return capabilities


def _swap_in_gpufilt():
    """Puts gpufilt's filter of each name of scipy.ndimage._filters into
    scipy.ndimage, with SciPy's array-API capabilities (which backends each
    filter supports: the tests' skip and xfail marks are made from them)."""
    from scipy._lib._array_api import xp_capabilities_table

    # By name too: where scipy.ndimage's function is a wrapper of the one the
    # table holds (a missing entry would skip every cupy case of its tests).
    by_name = {getattr(func, "__name__", None): caps for func, caps in list(xp_capabilities_table.items())
               if getattr(func, "__module__", "").startswith("scipy.ndimage")}
    for name in (*scipy.ndimage._filters.__all__, *scipy.ndimage._morphology.__all__,
                 *scipy.ndimage._fourier.__all__):
        original = getattr(scipy.ndimage, name)
        replacement = getattr(gpufilt.ndimage, name, None) or _not_provided(name)
        capabilities = xp_capabilities_table.get(original) or by_name.get(name)
        if capabilities is not None:
            xp_capabilities_table[replacement] = _with_cupy(capabilities)
        setattr(scipy.ndimage, name, replacement)


# SciPy's tests that gpufilt fails on purpose, by test name: where gpufilt
# does more than scipy. Marked xfail (strict: a pass would mean the
# difference is gone and this list is stale).
DELIBERATE_DIFFERENCES = {
    "test_gaussian_filter_float16": "gpufilt filters float16 data, which scipy refuses (RuntimeError)",
}


# Markers SciPy's tests carry. SciPy registers them in its conftest (1.17) or
# its source tree's pytest.ini (1.18, not installed): registered here so that
# strict marker checks pass with either.
SCIPY_MARKERS = ("array_api_backends", "thread_unsafe", "parallel_threads", "iterations", "slow", "xslow",
                 "fail_slow", "timeout", "skip_xp_backends", "xfail_xp_backends", "skip_xp_invalid_arg")


def pytest_configure(config):
    for marker in SCIPY_MARKERS:
        config.addinivalue_line("markers", f"{marker}: a marker of SciPy's tests")
    _swap_in_gpufilt()


# SciPy tests whose cupy marks stay: they note the test's own limits on cupy
# arrays, not cupyx's (test_binary_dilation34 compares with a list, which
# scipy's assertion takes as a numpy array, not a cupy one; the generic
# filters' tests pass Python functions, which run on the CPU only, in
# gpufilt as in cupyx: a TypeError on cupy arrays).
KEEP_CUPY_MARKS = {"test_binary_dilation34", "test_generic_filter_axes", "test_generic_filter1d01",
                   "test_generic_filter01", "test_ticket_701", "test_valid_origins1"}


def _without_cupy_marks(node):
    """Drops SciPy's skip and xfail marks for its cupy backend from a node:
    they note cupyx's shortcomings, and gpufilt runs in cupyx's place."""
    node.own_markers[:] = [m for m in node.own_markers
                           if not (m.name in ("xfail_xp_backends", "skip_xp_backends") and "cupy" in m.args)]


class _PytestRunningCupyXfails:
    """The `pytest` that SciPy's test module sees: pytest itself, but for
    xfail() calls inside a test on cupy arrays, which note cupyx's
    shortcomings ('cupy/cupy#8404') and are ignored, so that the test runs
    against gpufilt."""

    on_cupy = False

    def __getattr__(self, name):
        return getattr(pytest, name)

    def xfail(self, reason=""):
        if not self.on_cupy:
            pytest.xfail(reason)


_PYTEST = _PytestRunningCupyXfails()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    callspec = getattr(item, "callspec", None)
    xp = callspec.params.get("xp") if callspec is not None else None
    _PYTEST.on_cupy = getattr(xp, "__name__", "").endswith("cupy")
    yield
    _PYTEST.on_cupy = False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.originalname not in KEEP_CUPY_MARKS:
            for node in item.listchain():
                _without_cupy_marks(node)
        module = getattr(item, "module", None)
        if module is not None and getattr(module, "pytest", None) is pytest:
            module.pytest = _PYTEST
        reason = DELIBERATE_DIFFERENCES.get(item.originalname)
        if reason:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))

"""A pytest plugin that runs CuPy's own cupyx.scipy.ndimage filter tests
against gpufilt, on the GPU.

CuPy's tests/cupyx_tests/scipy_tests/ndimage_tests/test_filters.py compares
each filter called as ``scp.ndimage.<name>`` on cupy arrays (cupyx) with
scipy on numpy arrays. With this plugin loaded, those names in
``cupyx.scipy.ndimage`` are gpufilt's filters, so the cupy side runs gpufilt
and scipy stays the reference. The test file ships in CuPy's source
distribution, not in its wheels; with cupy-14.2.0.tar.gz from PyPI unpacked
under DIR, on a machine with a GPU::

    PYTHONPATH=tests python -m pytest -q -p cupyx_suite_plugin \\
        DIR/cupy-14.2.0/tests/cupyx_tests/scipy_tests/ndimage_tests/test_filters.py

(benchmarks/gpu_session.sh's ``peers`` step does this). Filters gpufilt does
not provide are skipped, naming them; CUPYX_DIFFERENCES lists where cupyx
deliberately differs from scipy and gpufilt follows scipy.
"""
from __future__ import annotations

import cupyx.scipy.ndimage
import pytest

import gpufilt.ndimage
from scipy_suite_plugin import _not_provided

# Tests where cupyx's answer (the test's expectation) is not scipy's and
# gpufilt gives scipy's, by test name and parameter substring.
CUPYX_DIFFERENCES: dict[str, str] = {}


# cupyx.scipy.ndimage's filters (CuPy 14.2): gpufilt's, and two it lacks.
FILTERS = (*gpufilt.ndimage.__all__, "generic_filter", "generic_filter1d")


def pytest_configure(config):
    for name in FILTERS:
        setattr(cupyx.scipy.ndimage, name, getattr(gpufilt.ndimage, name, None) or _not_provided(name))


def pytest_collection_modifyitems(config, items):
    for item in items:
        for key, reason in CUPYX_DIFFERENCES.items():
            if key in item.nodeid:
                item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


# cupy.testing requires the cupy side to raise exactly the public error
# classes the numpy side raised. Where scipy raises RuntimeError, gpufilt
# raises ArgumentError, a RuntimeError that is also a ValueError (gpufilt's
# own contract, DESIGN.md): such a test is an expected failure, not a
# regression, when that is the only difference.
DUAL_CLASS = "gpufilt's ArgumentError is scipy's RuntimeError and also a ValueError"


def _only_the_dual_class_differs(text):
    if "Different types of errors occurred" not in text:
        return False
    cupy_part, _, numpy_part = text.partition("\nnumpy\n")
    return "gpufilt._errors.ArgumentError" in cupy_part and "RuntimeError" in numpy_part


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or call.when != "call":
        return
    text = str(call.excinfo.value)
    if "NotProvided: not provided" in text:  # cupy.testing wraps even pytest's skips in an AssertionError
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1], "not provided: generic_filter or generic_filter1d")
    elif _only_the_dual_class_differs(text):
        report.outcome = "skipped"
        report.wasxfail = DUAL_CLASS

"""SciPy's own tests of the filters and morphology (scipy/ndimage/tests/
test_filters.py and test_morphology.py of the installed SciPy, 1.17 or 1.18)
run against gpufilt.ndimage on numpy arrays, in a child process
(scipy_suite_plugin.py swaps gpufilt's functions in).

Every test of a function gpufilt provides must pass; those of the functions
it does not provide (binary_hit_or_miss, the distance transforms) are
skipped, and
scipy_suite_plugin.DELIBERATE_DIFFERENCES lists the tests
gpufilt fails on purpose (xfail, strict). ``python tests/test_scipy_suite.py``
prints the whole report; on a GPU machine,
``SCIPY_ARRAY_API=1 python tests/test_scipy_suite.py`` adds SciPy's cupy
cases."""
import os
import re
import subprocess
import sys
import tempfile

import pytest

scipy = pytest.importorskip("scipy")
pytest.importorskip("hypothesis")  # SciPy's test file imports it

HERE = os.path.dirname(os.path.abspath(__file__))
# SciPy's test files of the functions gpufilt.ndimage provides.
TEST_FILES = ("test_filters", "test_morphology", "test_fourier")
# The releases whose test files this harness was checked against (1.17.1 on
# the 2-core machine, 1.18.1 on the GPU machine); others are skipped, not
# guessed at.
TESTED_SCIPY = ("1.17.", "1.18.")


def run_suite(*extra_args, capture=True):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")]))
    # -c os.devnull: SciPy's tests run without gpufilt's pytest configuration
    # (warnings as errors, strict markers), which pytest would otherwise find
    # above a virtual environment made inside the repository (as CI's is).
    command = [sys.executable, "-m", "pytest", "-q", "-c", os.devnull, "--rootdir", tempfile.gettempdir(),
               "-p", "no:cacheprovider", "-p", "scipy_suite_plugin",
               "-W", "ignore::pytest.PytestUnknownMarkWarning",  # scipy's conftest marks
               "--pyargs", *(f"scipy.ndimage.tests.{name}" for name in TEST_FILES), *extra_args]
    return subprocess.run(command, env=env, cwd=HERE, capture_output=capture, text=True)


@pytest.mark.skipif(not scipy.__version__.startswith(TESTED_SCIPY),
                    reason=f"the harness is checked against SciPy {' and '.join(TESTED_SCIPY)}x's test files, "
                           f"not {scipy.__version__}'s")
def test_scipy_filter_tests_pass_on_gpufilt():
    result = run_suite()
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr
    failures = [line for line in result.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert result.returncode == 0, f"{summary}\n" + "\n".join(failures[:40])
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed > 3000, summary  # the whole files ran, not a fraction of them


if __name__ == "__main__":  # extra arguments go to pytest (e.g. -n 8)
    sys.exit(run_suite("-rsx", *sys.argv[1:], capture=False).returncode)

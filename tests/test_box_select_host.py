"""The GPU box medians' selection code (src/cuda/box_select.cuh), compiled
for the host and checked against std::sort / std::nth_element on random
windows (tests/host/box_select_check.cu): runs without a GPU, so CI checks
the networks the CUDA kernels run, whatever the machine."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "host" / "box_select_check.cu"


def test_box_select_networks_match_sort(tmp_path):
    compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler on PATH")
    binary = tmp_path / "box_select_check"
    build = subprocess.run([compiler, "-std=c++17", "-O2", "-fconstexpr-ops-limit=1000000000",
                            f"-I{ROOT / 'src'}", "-x", "c++", str(SOURCE), "-o", str(binary)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(binary), "100000"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]
    assert " 0 failures" in run.stdout

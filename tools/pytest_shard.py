"""pytest plugin: run one shard of the selected tests.

With GPUFILT_SHARD=k/n, only every n-th selected test, starting at the k-th,
runs; the rest are deselected. tools/sanitize_cuda.sh loads it (`-p
pytest_shard`, with tools/ on PYTHONPATH) to deal the CUDA tests out evenly
to processes that each run under their own compute-sanitizer: sharding by
file was uneven (test_cuda_fused.py alone holds a fifth of the suite).
"""
from __future__ import annotations

import os

import pytest


@pytest.hookimpl(trylast=True)  # after `-m cuda` has deselected the rest, so shards count only what runs
def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("GPUFILT_SHARD")
    if not spec:
        return
    index, count = (int(part) for part in spec.split("/"))
    if not 0 <= index < count:
        raise pytest.UsageError(f"GPUFILT_SHARD={spec!r}: want k/n with 0 <= k < n")
    kept = items[index::count]
    config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i % count != index])
    items[:] = kept

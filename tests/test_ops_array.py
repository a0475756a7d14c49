"""gpufilt.ops array operations on the CPU (fill, broadcast_to, sum, add,
multiply, gather) and the bfloat16 dtype, with numpy (torch for bfloat16) as
the oracle: random data across dtypes, shapes, axes, layouts and
broadcasting, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

import gpufilt
from gpufilt import _dispatch, ndimage

from _helpers import INT_DTYPES, random_array


# ----------------------------------------------------------------- bfloat16

def test_bfloat16_torch_cpu_tensor_imports_and_describes_as_bfloat16():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(torch.bfloat16)[:, ::2]
    seen = gpufilt.describe(t)
    assert seen["dtype"] == "bfloat16"
    assert seen["itemsize"] == 2
    assert seen["shape"] == (3, 2)
    assert seen["strides"] == (8, 4)
    assert _dispatch.Operand(t).dtype == "bfloat16"


def test_bfloat16_dtype_compares_by_name_and_maps_back_to_torch():
    torch = pytest.importorskip("torch")
    assert _dispatch.is_bfloat16(_dispatch.BFLOAT16)
    assert _dispatch.dtype_kind(_dispatch.BFLOAT16) == "f"
    assert _dispatch._torch_dtype(_dispatch.BFLOAT16) is torch.bfloat16
    assert _dispatch._numpy_dtype(torch.float32) == np.float32


@pytest.mark.parametrize("where", ["input", "output"])
def test_ndimage_refuses_bfloat16_with_type_error(where, rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(random_array(rng, (5, 6), "float32"))
    b = x.to(torch.bfloat16)
    before = b.clone()
    with pytest.raises(TypeError, match="bfloat16"):
        if where == "input":
            ndimage.gaussian_filter(b, 1.0)
        else:
            ndimage.uniform_filter(x, 3, output=b)
    assert torch.equal(b, before)


def test_ndimage_still_refuses_and_accepts_what_it_did(rng):
    x = random_array(rng, (6, 7), "float16")
    assert ndimage.uniform_filter(x, 3).dtype == np.float16
    with pytest.raises(TypeError):
        ndimage.uniform_filter(np.zeros((3, 3), dtype="datetime64[s]"), 3)

"""The commonest calls (an exact numpy array, or cupy array on cupy's
current device, of a real dtype into a new array, a float cval, no stream) go
from the filter straight to the _core binding or _dispatch.CupyBinding,
skipping the Operand and _filter's output rules (ndimage._plain_binding).
They must return, raise and leave alone exactly what the general path does:
the general path is reached here with an int cval of the same value."""
from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.ndimage as snd

from gpufilt import ndimage as gnd

from _helpers import assert_matches, random_array

# (name, positional arguments after the input, keyword arguments)
CALLS = [
    ("gaussian_filter", (1.5,), {}),
    ("gaussian_filter", ((1.0, 0.0, 2.0),), {"order": (0, 0, 1)}),
    ("gaussian_filter1d", (1.0,), {"axis": 0, "order": 1}),
    ("uniform_filter", ((3, 4, 1),), {"origin": (1, 0, 0)}),
    ("uniform_filter1d", (5,), {"axis": -1}),
    ("minimum_filter1d", (3,), {"axis": 1}),
    ("maximum_filter1d", (4,), {"axis": 0, "origin": -1}),
    ("minimum_filter", (), {"size": 3}),
    ("maximum_filter", (), {"size": (2, 3, 1)}),
    ("median_filter", (), {"size": 3}),
    ("median_filter", (), {"size": 1}),  # one tap: the minimum path
    ("rank_filter", (2,), {"size": (3, 1, 3)}),
    ("rank_filter", (-1,), {"size": 2}),  # the maximum path
    ("percentile_filter", (30,), {"size": 3}),
    ("sobel", (), {"axis": 0}),
    ("prewitt", (), {"axis": -1}),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CALLS)]
EXTREME_RANKS = {"median_filter-10", "rank_filter-12"}


def layouts(x):
    """x as C-contiguous, Fortran-ordered and strided (negative step) arrays."""
    return {"C": x, "F": np.asfortranarray(x), "strided": x[::-1, :, ::2]}


@pytest.mark.parametrize("name, args, kwargs", CALLS, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int16", "bool"])
@pytest.mark.parametrize("mode", ["reflect", "constant"])
def test_plain_calls_return_the_general_paths_result(name, args, kwargs, dtype, mode, rng):
    ours, theirs = getattr(gnd, name), getattr(snd, name)
    for layout, x in layouts(random_array(rng, (7, 9, 12), dtype)).items():
        before = x.copy()
        plain = ours(x, *args, mode=mode, cval=2.0, **kwargs)
        general = ours(x, *args, mode=mode, cval=2, **kwargs)
        assert type(plain) is np.ndarray and plain.dtype == x.dtype and plain.shape == x.shape
        assert not np.shares_memory(plain, x)
        np.testing.assert_array_equal(plain, general, err_msg=layout)
        assert_matches(plain, theirs(x, *args, mode=mode, cval=2.0, **kwargs), err_msg=layout)
        np.testing.assert_array_equal(x, before)


def assert_plain_calls_skip_the_operand(monkeypatch, x):
    """The point of the shortcut: no Operand is built for a plain call on x
    (but for ranks at a footprint's ends, which take _min_or_max with a
    footprint), and one is for a call that is not plain."""
    built = []
    real = gnd._filter_input
    monkeypatch.setattr(gnd, "_filter_input", lambda obj: built.append(obj) or real(obj))
    for call_id, (name, args, kwargs) in zip(IDS, CALLS):
        getattr(gnd, name)(x, *args, **kwargs)
        assert (len(built) > 0) == (call_id in EXTREME_RANKS), call_id
        built.clear()
    gnd.uniform_filter(x, 3, cval=0)
    assert len(built) == 1


def test_plain_calls_skip_the_operand(monkeypatch, rng):
    assert_plain_calls_skip_the_operand(monkeypatch, random_array(rng, (5, 6, 7), np.float32))


@pytest.mark.parametrize("call", [
    lambda x, cval: gnd.gaussian_filter1d(x, 1.0, axis=3, cval=cval),
    lambda x, cval: gnd.uniform_filter(x, 2.5, cval=cval),
    lambda x, cval: gnd.uniform_filter1d(x, 3, origin=2, cval=cval),
    lambda x, cval: gnd.maximum_filter1d(x, 3, axis=-4, cval=cval),
    lambda x, cval: gnd.median_filter(x, cval=cval),  # neither size nor footprint
    lambda x, cval: gnd.rank_filter(x, 9, size=3, cval=cval),
    lambda x, cval: gnd.sobel(x, axis=2, cval=cval),
    lambda x, cval: gnd.gaussian_filter(x, 1.0, mode="bogus", cval=cval),
])
def test_plain_calls_raise_what_the_general_path_raises(call, rng):
    x = random_array(rng, (6, 7), np.float64)
    before = x.copy()
    with pytest.raises(Exception) as general:
        call(x, 0)
    with pytest.raises(type(general.value), match=f"^{re.escape(str(general.value))}$"):
        call(x, 0.0)
    np.testing.assert_array_equal(x, before)


@pytest.mark.cuda
@pytest.mark.parametrize("name, args, kwargs", CALLS, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int16"])
def test_plain_cupy_calls_return_the_general_paths_result(name, args, kwargs, dtype, rng):
    cupy = pytest.importorskip("cupy")
    ours = getattr(gnd, name)
    c = cupy.asarray(random_array(rng, (7, 9, 12), dtype))
    for layout, x in {"C": c, "F": cupy.asfortranarray(c), "strided": c[::-1, :, ::2]}.items():
        before = x.copy()
        plain = ours(x, *args, mode="reflect", cval=2.0, **kwargs)
        general = ours(x, *args, mode="reflect", cval=2, **kwargs)
        assert type(plain) is cupy.ndarray and plain.dtype == x.dtype and plain.shape == x.shape
        assert plain.data.ptr != x.data.ptr
        np.testing.assert_array_equal(cupy.asnumpy(plain), cupy.asnumpy(general), err_msg=layout)
        # float32 smoothings sum in float on the GPU: the CPU's result within tolerance
        assert_matches(cupy.asnumpy(plain), ours(cupy.asnumpy(x), *args, mode="reflect", cval=2.0, **kwargs),
                       err_msg=layout)
        np.testing.assert_array_equal(cupy.asnumpy(x), cupy.asnumpy(before))


@pytest.mark.cuda
def test_plain_cupy_calls_skip_the_operand_and_use_the_current_stream(monkeypatch, rng):
    cupy = pytest.importorskip("cupy")
    x = cupy.asarray(random_array(rng, (5, 6, 7), np.float32))
    assert_plain_calls_skip_the_operand(monkeypatch, x)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        y = gnd.uniform_filter(x, 3)
    stream.synchronize()
    assert_matches(cupy.asnumpy(y), gnd.uniform_filter(cupy.asnumpy(x), 3))

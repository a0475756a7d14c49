"""The filters memoise their argument normalisation (1-D passes, Gaussian
taps, footprint specs) for plain scalar arguments, to keep calls on small
arrays cheap. A cached result must never change what a call returns, raises
or warns: equal values of other types are checked afresh, errors are raised
on every call, and cached plans cannot be modified by a caller."""
from __future__ import annotations

import decimal
import fractions
import warnings

import numpy as np
import pytest
import scipy.ndimage as snd

from gpufilt import _args
from gpufilt import ndimage as gnd

from _helpers import assert_matches, random_array


def test_memoize_plain_caches_plain_scalars_only():
    calls = []

    @_args.memoize_plain
    def plan(*args):
        calls.append(args)
        return len(calls)

    assert plan(3, 1.5, "reflect", None) == plan(3, 1.5, "reflect", None) == 1
    assert plan(3.0, 1.5, "reflect", None) == 2  # 3.0 == 3, but another type: its own entry
    assert plan(True, 1.5, "reflect", None) == 3  # bool bypasses the cache
    assert plan(True, 1.5, "reflect", None) == 4
    assert plan((3, 3), 1.5, "reflect", None) == 5  # sequences bypass it
    assert plan((3, 3), 1.5, "reflect", None) == 6
    assert plan(np.int64(3), 1.5, "reflect", None) == 7


def test_memoize_plain_never_caches_errors():
    calls = []

    @_args.memoize_plain
    def plan(value):
        calls.append(value)
        raise ValueError("bad")

    for _ in range(2):
        with pytest.raises(ValueError, match="bad"):
            plan(3)
    assert calls == [3, 3]


def test_an_accepted_int_does_not_let_an_equal_float_order_through(rng):
    x = random_array(rng, (9,), np.float64)
    gnd.gaussian_filter(x, 1.0, order=1)
    with pytest.raises(TypeError, match="order must be an integer"):
        gnd.gaussian_filter(x, 1.0, order=1.0)


@pytest.mark.parametrize("size", [decimal.Decimal(3), "3"])
def test_an_accepted_size_does_not_let_an_equal_unaccepted_one_through(size, rng):
    # Decimal(3) == 3 and hashes alike, but is not a real number to numbers.Real.
    x = random_array(rng, (9,), np.float64)
    gnd.uniform_filter(x, 3)
    with pytest.raises(TypeError, match="size must be an integer"):
        gnd.uniform_filter(x, size)


def test_equal_sizes_of_other_types_give_the_same_result(rng):
    x = random_array(rng, (7, 8), np.float32)
    want = snd.uniform_filter(x, 3)
    for size in (3, 3.0, np.int64(3), fractions.Fraction(3), 3, 3.0):
        assert_matches(gnd.uniform_filter(x, size), want)


@pytest.mark.parametrize("call", [
    lambda x: gnd.uniform_filter(x, 3, mode="bogus"),
    lambda x: gnd.gaussian_filter(x, -1.0),
    lambda x: gnd.median_filter(x, 3, origin=5),
    lambda x: gnd.maximum_filter(x, 0),
    lambda x: gnd.sobel(x, axis=4),
    lambda x: gnd.percentile_filter(x, 140.0, 3),
])
def test_a_bad_argument_raises_on_every_call(call, rng):
    x = random_array(rng, (6, 5), np.float64)
    for _ in range(3):
        with pytest.raises((TypeError, ValueError, IndexError)):
            call(x)


def test_sobel_and_prewitt_do_not_share_a_cached_plan(rng):
    x = random_array(rng, (6, 7), np.float64)
    for _ in range(2):
        assert_matches(gnd.sobel(x, 0), snd.sobel(x, 0))
        assert_matches(gnd.prewitt(x, 0), snd.prewitt(x, 0))


@pytest.mark.parametrize("shape", [(16,), (5, 6), (3, 4, 5)])
def test_repeated_calls_match_scipy_whatever_the_rank(shape, rng):
    # One cache entry per rank: the passes of a 2-D call are not reused in 3-D.
    x = random_array(rng, shape, np.float64)
    for _ in range(2):
        assert_matches(gnd.uniform_filter(x, 3), snd.uniform_filter(x, 3))
        assert_matches(gnd.gaussian_filter(x, 1.5), snd.gaussian_filter(x, 1.5))
        assert_matches(gnd.median_filter(x, 3), snd.median_filter(x, 3))
        assert_matches(gnd.maximum_filter(x, 2), snd.maximum_filter(x, 2))
        assert_matches(gnd.sobel(x), snd.sobel(x))


def test_a_median_of_one_tap_takes_the_cached_minimum_path_twice(rng):
    x = random_array(rng, (6, 7), np.float64)
    for _ in range(2):
        assert_matches(gnd.median_filter(x, 1), snd.median_filter(x, 1))
        assert_matches(gnd.rank_filter(x, -1, 2), snd.rank_filter(x, -1, 2))


def test_cached_plans_are_immutable():
    passes = gnd._gaussian_passes(2, 1.0, 0, "reflect", 4.0, None, None)
    assert passes is gnd._gaussian_passes(2, 1.0, 0, "reflect", 4.0, None, None)
    for p in passes:
        assert isinstance(p, tuple) and isinstance(p[2], tuple)


@pytest.mark.parametrize("name", ["median_filter", "rank_filter", "percentile_filter",
                                  "minimum_filter", "maximum_filter"])
def test_the_ignored_size_warning_points_at_the_caller(name, rng):
    x = random_array(rng, (6, 7), np.float64)
    args = (3,) if name == "rank_filter" else (60,) if name == "percentile_filter" else ()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(gnd, name)(x, *args, size=5, footprint=np.ones((3, 3), bool))
    assert [w.filename for w in caught] == [__file__]

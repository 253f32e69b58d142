"""The shared checks of ``wsesparse._checks``: ``check_int``, ``check_real`` and the
allocation check (an early MemoryError: tests of each entry point's sizes beside their
other tests)."""

import fractions
import math

import numpy as np
import pytest

from wsesparse._checks import CHECK_MIN_BYTES, check_array_allocation, check_int, check_real


@pytest.mark.parametrize("value", [3, np.int8(3), np.int32(3), np.int64(3), np.uint64(3)],
                         ids=repr)
def test_int_accepts_python_and_numpy_integers(value):
    out = check_int(value, "n", minimum=1)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 3.0, np.float64(3.0), "3", None,
                                   1 + 0j, np.array(3), [3], fractions.Fraction(3)], ids=repr)
def test_int_rejects_bool_float_str_none_arrays(value):
    with pytest.raises(TypeError, match=r"^n must be a positive int, got "):
        check_int(value, "n", minimum=1)


@pytest.mark.parametrize("kw,expected", [
    ({}, "an int"),
    (dict(minimum=1), "a positive int"),
    (dict(minimum=0), "a nonnegative int"),
    (dict(minimum=2), "an int >= 2"),
    (dict(maximum=9), "an int <= 9"),
    (dict(minimum=0, maximum=9), r"an int in \[0, 9\]"),
    (dict(minimum=1, allow_none=True), "a positive int or None"),
])
def test_int_messages_name_the_argument_the_range_and_the_value(kw, expected):
    with pytest.raises(TypeError, match=rf"^nb must be {expected}, got 0\.5$"):
        check_int(0.5, "nb", **kw)


@pytest.mark.parametrize("value,kw", [
    (0, dict(minimum=1)), (-1, dict(minimum=0)), (10, dict(maximum=9)),
    (np.int64(10), dict(minimum=0, maximum=9)), (-(2**70), dict(minimum=0)),
])
def test_int_bounds_are_inclusive_and_checked(value, kw):
    with pytest.raises(ValueError, match=rf"^x must be .*, got {int(value)}$"):
        check_int(value, "x", **kw)
    lo, hi = kw.get("minimum"), kw.get("maximum")
    for edge in (lo, hi):
        if edge is not None:
            assert check_int(edge, "x", **kw) == edge


def test_int_without_bounds_takes_any_size():
    assert check_int(-(2**80), "x") == -(2**80)
    assert check_int(2**80, "x", minimum=1) == 2**80


def test_int_none():
    assert check_int(None, "n_threads", minimum=1, allow_none=True) is None
    with pytest.raises(TypeError, match="^n_threads must be a positive int, got None$"):
        check_int(None, "n_threads", minimum=1)


def test_int_messages_show_the_type_where_it_matters():
    with pytest.raises(TypeError, match=r"got True \(bool\)$"):
        check_int(True, "n")
    with pytest.raises(TypeError, match=r"got '8' \(str\)$"):
        check_int("8", "n")
    with pytest.raises(TypeError, match=r"got 2\.0 \(float64\)$"):
        check_int(np.float64(2.0), "n")


# -- check_real --------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0.25, np.float16(0.25), np.float32(0.25), np.float64(0.25),
                                   fractions.Fraction(1, 4)], ids=repr)
def test_real_accepts_python_and_numpy_reals(value):
    out = check_real(value, "p", minimum=0, maximum=1)
    assert out == 0.25 and type(out) is float


@pytest.mark.parametrize("value", [2, np.int64(2), np.uint8(2)], ids=repr)
def test_real_accepts_integers(value):
    out = check_real(value, "v", minimum=0, inclusive=(False, True))
    assert out == 2.0 and type(out) is float


@pytest.mark.parametrize("value", [True, np.bool_(False), "0.5", None, 0.5 + 0j, np.array(0.5),
                                   [0.5]], ids=repr)
def test_real_rejects_bool_str_none_complex_arrays(value):
    with pytest.raises(TypeError, match=r"^tol must be a number in \(0, 1\), got "):
        check_real(value, "tol", minimum=0, maximum=1, inclusive=(False, False))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float32("nan")], ids=repr)
def test_real_rejects_nan_and_inf_by_default(value):
    with pytest.raises(ValueError, match=r"^x must be a finite number, got (nan|inf|-inf)$"):
        check_real(value, "x")


def test_real_finite_false_lets_infinities_through_but_not_nan_past_a_bound():
    assert check_real(math.inf, "x", minimum=0, finite=False) == math.inf
    assert math.isnan(check_real(math.nan, "x", finite=False))
    with pytest.raises(ValueError, match="^x must be a nonnegative number, got nan$"):
        check_real(math.nan, "x", minimum=0, finite=False)


def test_real_huge_integers_are_infinite():
    with pytest.raises(ValueError, match="got 10{400}$"):
        check_real(10**400, "x", minimum=0)
    assert check_real(10**400, "x", finite=False) == math.inf


@pytest.mark.parametrize("inclusive,accepted,rejected", [
    ((True, True), [0, 1], []),
    ((False, False), [], [0, 1]),
    ((True, False), [0], [1]),
    ((False, True), [1], [0]),
])
def test_real_inclusive_bounds(inclusive, accepted, rejected):
    for v in accepted:
        assert check_real(v, "p", minimum=0, maximum=1, inclusive=inclusive) == v
    for v in rejected:
        with pytest.raises(ValueError, match=rf"^p must be a number in .0, 1., got {v}$"):
            check_real(v, "p", minimum=0, maximum=1, inclusive=inclusive)
    assert check_real(0.5, "p", minimum=0, maximum=1, inclusive=inclusive) == 0.5


@pytest.mark.parametrize("kw,expected", [
    ({}, "a finite number"),
    (dict(finite=False), "a number"),
    (dict(minimum=0, inclusive=(False, True)), "a positive finite number"),
    (dict(minimum=0), "a nonnegative finite number"),
    (dict(minimum=2.5), "a finite number >= 2.5"),
    (dict(minimum=2, inclusive=(False, True)), "a finite number > 2"),
    (dict(maximum=1e-300, inclusive=(True, False)), "a finite number < 1e-300"),
    (dict(minimum=0, maximum=1), r"a number in \[0, 1\]"),
    (dict(minimum=0, maximum=1, inclusive=(False, False)), r"a number in \(0, 1\)"),
    (dict(minimum=0, maximum=1, inclusive=(True, False)), r"a number in \[0, 1\)"),
    (dict(minimum=0, allow_none=True), "a nonnegative finite number or None"),
])
def test_real_messages_name_the_argument_the_range_and_the_value(kw, expected):
    with pytest.raises(TypeError, match=rf"^clock_hz must be {expected}, got '1e9' \(str\)$"):
        check_real("1e9", "clock_hz", **kw)


def test_real_value_messages_show_the_value():
    with pytest.raises(ValueError,
                       match=r"^frequency must be a positive finite number, got -1\.0$"):
        check_real(-1.0, "frequency", minimum=0, inclusive=(False, True))
    with pytest.raises(ValueError, match=r"^frequency must be a positive finite number, got 0$"):
        check_real(0, "frequency", minimum=0, inclusive=(False, True))
    with pytest.raises(ValueError, match=r"got 1\.5$"):
        check_real(np.float32(1.5), "p", minimum=0, maximum=1)


def test_real_none():
    assert check_real(None, "x", allow_none=True) is None
    with pytest.raises(TypeError, match="^x must be a finite number, got None$"):
        check_real(None, "x")


# -- check_array_allocation --------------------------------------------------------------------
def test_allocation_check_passes_what_fits():
    """Sizes that fit pass (no false alarm), small ones are not even measured."""
    check_array_allocation((CHECK_MIN_BYTES // 8 + 1,), np.float64, "a 64 MiB array")
    check_array_allocation((3, 4), np.float64, "tiny")


@pytest.mark.parametrize("v1", [False, True])
def test_available_memory_leaves_reclaimable_cache_out_of_the_cgroup_usage(tmp_path, monkeypatch,
                                                                          v1):
    """A cgroup near its limit because of page cache still has room: the headroom is the
    limit less the usage without the inactive file pages (v2 memory.stat "inactive_file",
    v1 "total_inactive_file"); a missing statistic counts as none reclaimable. (MiB sizes:
    the machine's own MemAvailable, the other bound, is larger.)"""
    from wsesparse import _checks
    mib = 1 << 20
    limit, usage, stat = (tmp_path / n for n in ("limit", "usage", "stat"))
    limit.write_text(f"{8 * mib}\n")
    usage.write_text(f"{7 * mib}\n")
    key = "total_inactive_file" if v1 else "inactive_file"
    stat.write_text(f"anon {mib}\nfile {6 * mib}\n{key} {5 * mib}\nactive_file {mib}\n")
    monkeypatch.setattr(_checks, "_CGROUP_FILES", ((str(limit), str(usage), str(stat), key),))
    assert _checks.available_memory() == 6 * mib
    stat.unlink()
    assert _checks.available_memory() == 1 * mib


@pytest.mark.parametrize("seed, exc", [(-1, ValueError), ([1, -2], ValueError),
                                       (np.array([-1, 2]), ValueError), (range(-1, 2), ValueError),
                                       ([1, "a"], TypeError), ("x", TypeError), (1.5, TypeError)])
def test_check_seed_errors_follow_numpy(seed, exc):
    """A negative int seed (alone, in a list, an array or a range) is a ValueError, as in
    numpy's SeedSequence; a seed of another type a TypeError; both name the argument."""
    from wsesparse._checks import check_seed

    with pytest.raises(exc, match="seed must be None or a nonnegative int"):
        check_seed(seed)
    assert check_seed(np.array([1, 2])) is not None and check_seed(None) is None

"""``wsesparse._timing``: best-of-repeats timing."""

import pytest


def test_best_time_single_call_threshold():
    from wsesparse._timing import best_time
    calls = []
    _, t = best_time(lambda: calls.append(1) or sum(range(20000)), repeats=3, budget=1e-9,
                     single_call_above=10.0)
    assert len(calls) >= 3 and t > 0                # under the threshold: repeats
    calls.clear()
    best_time(lambda: calls.append(1) or sum(range(20000)), repeats=3, budget=1e-9)
    assert len(calls) == 1                           # default 2 * budget: the warm-up only


def test_thread_counts():
    from wsesparse._timing import thread_counts
    assert thread_counts(16) == [1, 2, 4, 8, 16]
    assert thread_counts(6) == [1, 2, 4, 6]
    assert thread_counts(1) == [1]
    assert thread_counts(0) == [1]  # (an unknown core count: one thread)


def test_comma_list_casts_and_skips_empty_items():
    from wsesparse._timing import comma_list
    assert comma_list(float)("0.1,,1e-3,") == [0.1, 1e-3]
    assert comma_list(str)("") == []
    with pytest.raises(ValueError):
        comma_list(int)("1,x")

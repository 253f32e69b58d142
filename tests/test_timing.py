"""``wsesparse._timing``: best-of-repeats timing."""


def test_best_time_single_call_threshold():
    from wsesparse._timing import best_time
    calls = []
    _, t = best_time(lambda: calls.append(1) or sum(range(20000)), repeats=3, budget=1e-9,
                     single_call_above=10.0)
    assert len(calls) >= 3 and t > 0                # under the threshold: repeats
    calls.clear()
    best_time(lambda: calls.append(1) or sum(range(20000)), repeats=3, budget=1e-9)
    assert len(calls) == 1                           # default 2 * budget: the warm-up only

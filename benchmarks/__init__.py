"""asv benchmarks for wsesparse (see asv.conf.json and benchmarks/README.md).

``bench_*.py`` hold the asv suite. ``peers.py`` and ``crossover.py`` are standalone scripts
(run with ``python benchmarks/peers.py``); asv imports them too, so they do no work at import.
"""

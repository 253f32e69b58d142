"""One default dtype for every estimate_* and execute_* call (float16), and the two
named readings of the partial-sum cost."""

import dataclasses
import inspect

import numpy as np
import scipy.sparse as sp

from wsesparse import wafer
from wsesparse.wafer.machine import DEFAULT_DTYPE


def test_one_default_dtype_everywhere():
    assert DEFAULT_DTYPE == "float16"
    for f in (wafer.estimate_gemm, wafer.execute_gemm, wafer.estimate_gemv, wafer.execute_gemv,
              wafer.estimate_gradient):
        assert inspect.signature(f).parameters["dtype"].default == DEFAULT_DTYPE, f.__name__


def test_same_call_with_defaults_same_cycles():
    """The issue's example: one MiniLM-sized layer (384 x 1536 FFN) on an 8 x 4 grid used to
    give 506,476 cycles through execute_gemm (float32) and 129,450 through estimate_gemm
    (float16). With one default the two agree, and the explicit dtype still selects."""
    m = dataclasses.replace(wafer.WSE2, rows=8, cols=4)
    W = sp.random(384, 1536, density=0.1, format="csr", random_state=0)
    X = np.random.default_rng(0).standard_normal((1536, 64))
    _, ex = wafer.execute_gemm(W, X, machine=m)
    est = wafer.estimate_gemm(W, 64, machine=m)
    assert ex.cycles == est.cycles and ex.dtype == est.dtype == "float16"
    _, ex32 = wafer.execute_gemm(W, X, machine=m, dtype="float32")
    assert ex32.cycles == wafer.estimate_gemm(W, 64, machine=m, dtype="float32").cycles
    assert ex32.cycles > est.cycles
    A = sp.random(40, 30, density=0.3, format="csr", random_state=1)
    y, rep = wafer.execute_gemv(A, np.ones(30), machine=m)
    assert y.dtype == np.float16 and rep.cycles == wafer.estimate_gemv(A, machine=m).cycles

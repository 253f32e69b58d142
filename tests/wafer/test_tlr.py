"""``wafer.estimate_tlrmvm``: golden cycle counts derived by hand, the published figure,
the packing of tiles into cores, and bad arguments.

Before the fixes estimate_tlrmvm raised IndexError / AttributeError on bad input.
Catalogue: docs/adversarial_inputs.md.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from wsesparse import TLRBatch, TLRMatrix, wafer
from wsesparse.datasets import seismic_slice
from wsesparse.wafer.machine import WSE2
from wsesparse.wafer.tlr import PUBLISHED_TLRMVM_BYTES_PER_S, estimate_tlrmvm


TINY = dataclasses.replace(WSE2, name="tiny", rows=2, cols=2, sram_bytes=4096, fmac_fp32=1,
                           payload_bits=32, cycles_per_hop=1, clock_hz=1e9)


def _rank_one_tiles(dtype=np.complex64) -> TLRMatrix:
    # 8x8 matrix, nb=4: 2x2 tiles, every tile rank 1.
    u = np.ones((4, 1))
    return TLRMatrix.from_tiles((8, 8), 4, lambda i, j: (u, u), dtype=dtype)


def test_golden_one_core_per_tile_column():
    """Both tiles of a column fit one core.

    Per core: 2 tiles x 1 rank x (4 V + 4 U) = 16 complex values; a complex
    multiply-add is 4 fp32 FMAC cycles -> phase 1 = 8 * 4 = 32 cycles (x
    receive: 4 values x 2 words = 8 cycles, overlapped), phase 3 = 32.
    Broadcast latency rows + cols = 4. Reduction of y_i (4 values, 2 words
    each) over 2 chunks: 8 + 1 hop = 9. Total 77 cycles. 2 cores per matrix,
    4 cores -> 2 copies; bytes per copy = U + V (4 tiles x 8 values) * 8 B = 256
    plus x and y once (8 + 8) * 8 B = 128 -> 384.
    """
    est = estimate_tlrmvm(_rank_one_tiles(), TINY, reserved_bytes=0)
    assert (est.phase1_cycles, est.phase2_cycles, est.phase3_cycles) == (32, 0, 32)
    assert (est.broadcast_cycles, est.reduction_cycles, est.total_cycles) == (4, 9, 77)
    assert est.cores_per_matrix == 2 and est.copies == 2 and est.fits
    assert est.bytes_per_product == 384
    assert est.bandwidth_bytes_per_s == pytest.approx(2 * 384 / 77e-9)


def test_golden_split_by_sram():
    """SRAM for one tile per core: 200 B - x_j (32 B) leaves 168 B; a tile needs
    y buffer 32 B + one rank (4 + 4 + 1) * 8 = 72 B = 104 B, two would need 208 B.
    4 cores of 8 values: phase 1 = phase 3 = 4 * 4 = 16; total 16+16+4+9 = 45."""
    m = dataclasses.replace(TINY, sram_bytes=200)
    est = estimate_tlrmvm(_rank_one_tiles(), m, reserved_bytes=0)
    assert est.cores_per_matrix == 4 and est.copies == 1
    assert est.total_cycles == 45
    assert est.max_chunk_bytes == 32 + 104


def test_real_dtype_costs_one_fmac_per_value():
    est = estimate_tlrmvm(_rank_one_tiles(np.float32), TINY, reserved_bytes=0)
    # 8 values per phase at 1 cycle; x receive 4 values x 1 word = 4 cycles
    assert (est.phase1_cycles, est.phase3_cycles) == (8, 8)
    assert est.reduction_cycles == 4 + 1


def test_rank_too_large_for_sram_and_bad_args():
    with pytest.raises(ValueError, match="smaller nb"):
        estimate_tlrmvm(_rank_one_tiles(), dataclasses.replace(TINY, sram_bytes=100),
                        reserved_bytes=0)
    with pytest.raises(ValueError, match="systems must be"):
        estimate_tlrmvm(_rank_one_tiles(), TINY, systems=0)
    with pytest.raises(ValueError, match="copies must be"):
        estimate_tlrmvm(_rank_one_tiles(), TINY, copies=0)
    with pytest.raises(TypeError, match="TLRMatrix or TLRBatch"):
        estimate_tlrmvm(np.ones((3, 3)), TINY)
    est = estimate_tlrmvm(_rank_one_tiles(), TINY, copies=5, reserved_bytes=0)
    assert not est.fits and "3 waves" in est.notes[0]
    # 3 waves of 77 cycles plus the bases of the 3 copies past the 2 resident ones (384 bytes
    # each) through the 150 GB/s intake (2/3 of all 5 copies' before: waves of equal size)
    want = 3 * 77e-9 + (5 - 2) * 384 / 150e9
    assert "2 copies fit at once" in est.notes[0]
    assert est.time_s == pytest.approx(want)


def test_one_copy_past_a_wave_streams_one_copy():
    """One copy more than fit: a second wave and one copy's bases through the intake. The
    bases of all copies times (waves - 1) / waves were streamed: 1,800x the time (a review)."""
    T = _rank_one_tiles()
    fit = estimate_tlrmvm(T, TINY, reserved_bytes=0)
    more = estimate_tlrmvm(T, TINY, copies=fit.copies + 1, reserved_bytes=0)
    assert fit.fits and not more.fits and "2 waves" in more.notes[0]
    one_copy = more.bytes_per_product / TINY.weight_intake_bytes_per_s
    assert more.time_s == pytest.approx(2 * fit.time_s + one_copy)


def test_seismic_on_48_systems_within_a_factor_two_of_published():
    """The model's ceiling is 2 B/core/cycle (complex fp32 at 1 FMAC/cycle);
    the record is 3.04 B/core/cycle. The estimate must land between 40 % and
    100 % of 92.58 PB/s and scale linearly with systems."""
    T = TLRMatrix.from_dense(seismic_slice(nx=30, ny=30, frequency=15.0), nb=128, tol=1e-3)
    e1 = estimate_tlrmvm(T, WSE2, systems=1)
    e48 = estimate_tlrmvm(T, WSE2, systems=48)
    assert 0.4 < e48.bandwidth_bytes_per_s / PUBLISHED_TLRMVM_BYTES_PER_S < 1.0
    assert e48.bandwidth_bytes_per_s == pytest.approx(48 * e1.bandwidth_bytes_per_s, rel=1e-3)
    assert e48.bytes_per_core_cycle <= 2.0
    assert e48.max_chunk_bytes <= WSE2.sram_bytes
    batch = TLRBatch([T, T])
    eb = estimate_tlrmvm(batch, WSE2, copies=1)
    assert eb.cores_per_matrix == 2 * e1.cores_per_matrix


def test_chunk_bytes_spreads_over_more_cores():
    T = TLRMatrix.from_dense(seismic_slice(nx=20, ny=20), nb=100, tol=1e-3)
    big = estimate_tlrmvm(T, WSE2, copies=1)
    small = estimate_tlrmvm(T, WSE2, copies=1, chunk_bytes=8 * 1024)
    assert small.cores_per_matrix > big.cores_per_matrix
    assert small.max_chunk_bytes <= 8 * 1024
    assert small.phase1_cycles < big.phase1_cycles
    with pytest.raises(ValueError, match="chunk_bytes must be"):
        estimate_tlrmvm(T, WSE2, chunk_bytes=10**6)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 60), n=st.integers(1, 60), nb=st.integers(4, 24), seed=st.integers(0, 999),
       budget=st.integers(600, 6000))
def test_packing_conserves_work_and_respects_sram(m, n, nb, seed, budget):
    """Every rank of every tile lands on exactly one core and no chunk exceeds the budget."""
    from wsesparse.wafer.tlr import _pack

    rng = np.random.default_rng(seed)
    rp = list(range(0, m, nb)) + [m]
    cp = list(range(0, n, nb)) + [n]
    ranks = {(i, j): int(rng.integers(0, 1 + min(rp[i + 1] - rp[i], cp[j + 1] - cp[j])))
             for i in range(len(rp) - 1) for j in range(len(cp) - 1)}
    T = TLRMatrix.from_tiles(
        (m, n), nb, lambda i, j: (np.ones((rp[i + 1] - rp[i], ranks[i, j])),
                                  np.ones((cp[j + 1] - cp[j], ranks[i, j]))), dtype=np.complex64)
    try:
        elems, xlen, contrib, max_bytes = _pack(T, 8, budget)
    except ValueError as exc:
        assert "smaller nb" in str(exc)
        return
    assert elems.sum() == T.U.size + T.V.size
    assert max_bytes <= budget
    assert (contrib >= (T.ranks.sum(axis=1) > 0)).all()


# -- bad input ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tlr():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 6)) @ rng.standard_normal((6, 30))
    return TLRMatrix.from_dense(A, nb=16, tol=1e-6)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(machine=None), TypeError, "machine must be a wafer.Machine"),
    (dict(machine="wse2"), TypeError, "machine must be a wafer.Machine"),
    (dict(systems=2.0), TypeError, "systems must be an int in"),
    (dict(systems=True), TypeError, "systems must be an int in"),
    (dict(copies=-1), ValueError, "copies must be an int in \\[1, "),
    # (a review: 10**6 systems gave 1.6 million PB/s, 10**400 a bare OverflowError)
    (dict(systems=wafer.WSE2.max_engines + 1), ValueError,
     "systems must be an int in \\[1, 192\\]"),
    (dict(systems=10**400), ValueError, r"systems must be .*, got an int of 1329 bits"),
    (dict(systems=10**5000), ValueError, r"systems must be .*, got an int of 16610 bits"),
    (dict(copies=10**400), ValueError, "copies must be"),
    (dict(reserved_bytes=-1), ValueError, "reserved_bytes must be an int"),
    (dict(reserved_bytes=wafer.WSE2.sram_bytes), ValueError, "reserved_bytes must be an int"),
    (dict(reserved_bytes=10.0), TypeError, "reserved_bytes must be an int"),
    (dict(chunk_bytes=0), ValueError, "chunk_bytes must be an int"),
    (dict(chunk_bytes=10**9), ValueError, "chunk_bytes must be an int"),
    (dict(machine=dataclasses.replace(wafer.WSE2, sram_bytes=100), reserved_bytes=0),
     ValueError, "use a smaller nb"),
])
def test_tlrmvm_bad_arguments(tlr, kw, exc, match):
    with pytest.raises(exc, match=match):
        estimate_tlrmvm(tlr, **kw)


def test_tlrmvm_bad_operator(tlr):
    with pytest.raises(ValueError, match="empty TLRBatch"):
        estimate_tlrmvm(TLRBatch([]))
    cplx = TLRMatrix.from_dense(tlr.toarray().astype(np.complex128), nb=16, tol=1e-6)
    with pytest.raises(ValueError, match="mixes real and complex"):
        estimate_tlrmvm(TLRBatch([tlr, cplx]))
    with pytest.raises(TypeError, match="TLRMatrix or TLRBatch"):
        estimate_tlrmvm(None)


def test_tlrmvm_nb_larger_than_matrix_and_zero_ranks():
    """One tile (nb > m, n) and an all-zero matrix (every rank 0) are costed, not errors."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 4)) @ rng.standard_normal((4, 20))
    one = estimate_tlrmvm(TLRMatrix.from_dense(A, nb=1000, tol=1e-6), copies=1)
    assert one.fits and one.cores_per_matrix >= 1 and one.total_cycles > 0
    zero = estimate_tlrmvm(TLRMatrix.from_dense(np.zeros((30, 20)), nb=8), copies=1)
    assert zero.cores_per_matrix == 0 and zero.phase1_cycles == zero.phase3_cycles == 0
    assert zero.total_cycles > 0 and np.isfinite(zero.bandwidth_bytes_per_s)


def test_rank_zero_matrix_is_one_copy_of_nothing():
    """All ranks 0: one copy, no cores, a note (it reported 745,500 copies on 0 cores and
    0.29 PB/s; with cycles_per_hop=0 a ZeroDivisionError)."""
    T = TLRMatrix.from_dense(np.zeros((100, 100), np.float32), nb=32, tol=1e-3)
    est = estimate_tlrmvm(T)
    assert (est.copies, est.cores_per_matrix) == (1, 0) and est.fits
    assert any("no bases" in n for n in est.notes)
    assert est.bandwidth_bytes_per_s < 1e12
    flat = estimate_tlrmvm(T, machine=dataclasses.replace(WSE2, cycles_per_hop=0))
    assert flat.total_cycles == 0 and flat.bandwidth_bytes_per_s == float("inf")


def test_summary_adds_up_with_waves():
    """With more copies than the cores hold, the summed terms are one wave's and the line
    says so (it printed them '= total', which they did not add up to)."""
    T = TLRMatrix.from_dense(np.random.default_rng(0).standard_normal((200, 200))
                             .astype(np.float32), nb=32, tol=1e-3)
    one = estimate_tlrmvm(T, copies=1)
    assert f"= {one.total_cycles} (" in one.summary()
    many = estimate_tlrmvm(T, copies=10 * one.cores_available // one.cores_per_matrix)
    assert not many.fits and "a wave;" in many.summary()
    assert f"{many.total_cycles} in all with the waves" in many.summary()


def test_a_copy_lives_on_one_engine():
    """Copies are counted per engine: 48 engines hold 48 times one engine's copies, at 48
    times its bandwidth. A review found the cores of all engines pooled: 8-core copies on 48
    WSE-2s (745,500 cores each, 4 left over) gave 24 copies more, straddling two engines."""
    T = TLRMatrix.from_dense(np.random.default_rng(0).standard_normal((200, 200))
                             .astype(np.float32), nb=32, tol=1e-3)
    e1, e48 = estimate_tlrmvm(T, systems=1), estimate_tlrmvm(T, systems=48)
    assert e1.copies == wafer.WSE2.cores // e1.cores_per_matrix
    assert e48.copies == 48 * e1.copies and e48.fits
    assert e48.bandwidth_bytes_per_s == pytest.approx(48 * e1.bandwidth_bytes_per_s, rel=1e-12)
    over = estimate_tlrmvm(T, systems=2, copies=2 * e1.copies + 1)
    assert not over.fits and f"{2 * e1.copies} copies fit at once ({e1.copies} per engine): " \
        "2 waves" in over.notes[0]


def test_double_precision_note_names_every_double_dtype_in_any_order():
    """The note looked at the batch's first matrix only: [float32, float64] had none."""
    A = np.random.default_rng(0).standard_normal((50, 40))
    T64 = TLRMatrix.from_dense(A, nb=16, tol=1e-3)
    T32 = TLRMatrix.from_dense(A, nb=16, tol=1e-3, dtype=np.float32)
    a = estimate_tlrmvm(TLRBatch([T64, T32]), copies=1)
    b = estimate_tlrmvm(TLRBatch([T32, T64]), copies=1)
    note = "float64 costed as single precision (fp32 on the wafer)"
    assert note in a.notes and note in b.notes and a.total_cycles == b.total_cycles
    assert not any("costed as single" in n
                   for n in estimate_tlrmvm(TLRBatch([T32, T32]), copies=1).notes)

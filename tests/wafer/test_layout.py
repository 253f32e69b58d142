"""``wafer.make_layout``: tokens per core, passes and the SRAM fit; bad arguments."""

import dataclasses

import pytest

from wsesparse import wafer
from wsesparse.wafer import make_layout


def test_layout_passes_and_fit():
    m = dataclasses.replace(wafer.WSE2, rows=2, cols=2, sram_bytes=200)
    # fp32, 1 input + 1 output feature per row: 4 + 4 + 4 acc + 2*4 buffers = 20 B/token
    lay = make_layout(m, 2, 2, 46, features_per_row_max=1, dtype="float32")
    assert lay.tokens_per_core == 23 and lay.passes == 3
    assert lay.pass_widths == ((8, 2), (7, 1)) and lay.fits
    assert lay.sram_bytes_per_core == 160
    tiny = dataclasses.replace(m, sram_bytes=10)
    bad = make_layout(tiny, 2, 2, 4, features_per_row_max=1, dtype="float32")
    assert not bad.fits and "NOT fit" in bad.note
    # several engines: each core sees fewer tokens
    assert make_layout(m, 2, 2, 48, 1, engines=4, dtype="float32").tokens_per_core == 6


@pytest.mark.parametrize("kwargs,exc,word", [
    (dict(n_tokens=0), ValueError, "n_tokens"), (dict(engines=2.0), TypeError, "engines"),
    (dict(dtype="int8"), ValueError, "dtype"), (dict(engines=100), ValueError, "engines"),
])
def test_layout_rejects_bad_input(kwargs, exc, word):
    args = dict(machine=wafer.WSE2, n_out=4, n_in=4, n_tokens=8, features_per_row_max=1)
    args.update(kwargs)
    with pytest.raises(exc, match=word):
        make_layout(**args)

"""The printed table of ``wsesparse bench``: columns line up and ratios read as the summary."""

from wsesparse.bench.tables import format_row, header


def test_columns_line_up_for_long_names_and_dtypes():
    """A review: 'wsesparse' and 'graphblas' overflowed their 8-character columns and
    complex128 its 7, so the header's bars stood two places right of the rows'."""
    present = ["wsesparse", "CSR", "scipy", "graphblas", "torch"]
    row = {"M": 4096, "N": 64, "density": 0.01, "dtype": "complex128", "nnz": 167772,
           "wsesparse": 12.5, "CSR": 13.0, "scipy": 2.0, "graphblas": 3.25, "torch": "slow",
           "best_peer": "graphblas", "ratio": 0.9649, "ratio_csr": 4.0, "vs_scipy": 6.25}
    head, line = header(present), format_row(row, present)
    bars = [i for i, c in enumerate(head) if c == "|"]
    assert len(bars) == 2 and bars == [i for i, c in enumerate(line) if c == "|"]
    assert len(head) == len(line)
    # ratios with two decimals: 0.9649 read 1.0 above a summary that said 0.96x
    assert line.split("|")[-1].split() == ["graphblas", "0.96", "4.00", "6.25"]

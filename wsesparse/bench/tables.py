"""The printed output of ``wsesparse bench``: the table's header and rows, and the summary."""

from __future__ import annotations


def _fmt(v, width=8):
    """A rate (one decimal, three under 0.05), a status string or "-", right-aligned."""
    if isinstance(v, float):
        return f"{v:{width}.1f}" if v >= 0.05 else f"{v:{width}.3f}"
    if v is None:
        return f"{'-':>{width}}"
    return f"{str(v)[:width]:>{width}}"


def _ratio(v, width):
    """A ratio with two decimals (one showed 0.96 as 1.0 above a summary that said 0.96x)."""
    return f"{v:{width}.2f}" if isinstance(v, float) else _fmt(v, width)


def _widths(present):
    """Library columns as wide as their names ('wsesparse' overflowed 8 and shifted the
    header against the rows)."""
    return [max(8, len(c)) for c in present]


_DTYPE_WIDTH = 10  # complex128


def header(present):
    """The table's header line.

    Parameters
    ----------
    present : sequence of str
        The library columns, in order.

    Returns
    -------
    str

    Examples
    --------
    >>> print(header(["scipy"]))
         M     N density      dtype        nnz |    scipy |      best  ratio  r_CSR vs_scipy
    """
    cols = " ".join(f"{c:>{w}}" for c, w in zip(present, _widths(present)))
    return (f"{'M':>6} {'N':>5} {'density':>7} {'dtype':>{_DTYPE_WIDTH}} {'nnz':>10} | {cols} | "
            f"{'best':>9} {'ratio':>6} {'r_CSR':>6} {'vs_scipy':>8}")


def format_row(row, present):
    """One point's line of the table.

    Parameters
    ----------
    row : dict
        What :func:`~wsesparse.bench.points.run_point` returned.
    present : sequence of str
        The library columns, as for :func:`header`.

    Returns
    -------
    str

    Examples
    --------
    >>> row = {"M": 64, "N": 2, "density": 0.3, "dtype": "float64", "nnz": 1229,
    ...        "wsesparse": 2.5, "scipy": "FAIL", "best_peer": "scipy"}
    >>> print(format_row(row, ["wsesparse"]))
        64     2     0.3    float64       1229 |       2.5 |     scipy      -      -        -
    """
    lead = f"{row['M']:>6} {row['N']:>5} {row['density']:>7g} {row['dtype']:>{_DTYPE_WIDTH}}"
    if "skipped" in row:
        return f"{lead} skipped: {row['skipped']}"
    cols = " ".join(_fmt(row.get(c), w) for c, w in zip(present, _widths(present)))
    extra = ""
    if "spmv_GBs" in row:
        extra = f"  SpMV {row['spmv_GBs']:.1f} GB/s"
    return (f"{lead} {row['nnz']:>10} | {cols} | {row.get('best_peer', '-'):>9} "
            f"{_ratio(row.get('ratio'), 6)} {_ratio(row.get('ratio_csr'), 6)} "
            f"{_ratio(row.get('vs_scipy'), 8)}{extra}")


def summary(rows, triad):
    """The summary printed under the table.

    Parameters
    ----------
    rows : list of dict
        Every point's row.
    triad : float or None
        The best triad bandwidth (GB/s), for the SpMV rows; None when not measured.

    Returns
    -------
    str
        Lines: where wsesparse is slower than the best peer, its smallest ratios for
        N >= 8 at densities up to 1 % and 10 %, against scipy, and the SpMV bandwidths.
    """
    done = [r for r in rows if "skipped" not in r and isinstance(r.get("ratio"), float)]
    lines = ["", "Summary (ratio = wsesparse GFLOP/s / best peer GFLOP/s; > 1 means wsesparse "
             "is faster)"]
    for key, label in (("ratio", "sparse_matmul (one-shot)"),
                       ("ratio_csr", "sparse_matmul (prepared CSR)")):
        rr = [r for r in done if isinstance(r.get(key), float)]
        if not rr:
            continue
        below = [r for r in rr if r[key] < 1.0]
        lines.append(f"  {label}: slower than the best peer at {len(below)} of {len(rr)} points")
        for r in below:
            lines.append(f"      M={r['M']} N={r['N']} density={r['density']:g} {r['dtype']}: "
                         f"{r[key]:.2f}x vs {r['best_peer']}")
        sub = [r for r in rr if r["N"] >= 8 and r["density"] <= 0.01]
        if sub:
            w = min(sub, key=lambda r: r[key])
            lines.append(f"  {label}: min ratio to best peer for N>=8, density<=1%: "
                         f"{w[key]:.2f} (M={w['M']} N={w['N']} d={w['density']:g} "
                         f"{w['dtype']}, best peer {w['best_peer']})")
        sub = [r for r in rr if r["N"] >= 8 and r["density"] <= 0.1]
        if sub:
            w = min(sub, key=lambda r: r[key])
            lines.append(f"  {label}: min ratio to best peer for N>=8, density<=10%: "
                         f"{w[key]:.2f} (M={w['M']} N={w['N']} d={w['density']:g} {w['dtype']})")
    sub = [r for r in done if r["N"] >= 8 and isinstance(r.get("vs_scipy"), float)]
    if sub:
        w = min(sub, key=lambda r: r["vs_scipy"])
        lines.append(f"  min ratio sparse_matmul / scipy for N>=8: {w['vs_scipy']:.2f} "
                     f"(M={w['M']} N={w['N']} d={w['density']:g} {w['dtype']})")
    spmv = [r for r in done if "spmv_GBs" in r]
    if spmv and triad:
        lines.append("  SpMV (N=1) bandwidth, prepared CSR: "
                     + ", ".join(f"{r['M']}/{r['density']:g}/{r['dtype']}: "
                                 f"{r['spmv_GBs']:.0f} GB/s ({100 * r['spmv_GBs'] / triad:.0f}%)"
                                 for r in spmv)
                     + f"  [triad {triad:.1f} GB/s; small matrices run from cache]")
    return "\n".join(lines)

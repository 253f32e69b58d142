"""``wsesparse simulate`` (wsesparse/wafer/cli.py): the table, JSON, matrix files and plot;
every bad command line exits with code 2 and one ``wsesparse simulate: error: ...`` line
naming the option, never a traceback or a crash.

Before the fixes: an empty or truncated ``--matrix`` .npz raised EOFError / BadZipFile out of
``main``, a corrupt CSR in an .npz segfaulted the estimator and ``--tokens 10**30`` raised
OverflowError. Catalogue: docs/adversarial_inputs.md.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from wsesparse.cli import main


def test_simulate_table(capsys):
    assert main(["simulate", "--shape", "256x512", "--sparsity", "0.9", "--tokens", "5000"]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "256 x 512" in out and "estimator time" in out


def test_simulate_json_matrix_file_and_plot(tmp_path, capsys):
    W = sp.random(100, 80, density=0.2, format="csr", random_state=0)
    path = tmp_path / "w.npz"
    sp.save_npz(path, W)
    png = tmp_path / "rows.png"
    assert main(["simulate", "--matrix", str(path), "--tokens", "64", "--machine", "wse3",
                 "--engines", "2", "--balance", "greedy", "--dtype", "float32", "--json",
                 "--plot", str(png)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["nnz"] == W.nnz and d["machine"] == "WSE-3" and d["engines"] == 2
    assert d["balance"] == "greedy" and len(d["row_nnz"]) == 762
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv,word", [
    (["--shape", "12x"], "--shape"), (["--matrix", "missing.npz"], "--matrix"),
    (["--sparsity", "1.5"], "--sparsity"), (["--tokens", "0"], "--tokens"),
    # (these three said n_tokens, engines and seed: the estimate's names)
    (["--engines", "0"], "--engines must be a positive int"),
    (["--seed", "-1"], "--seed must be an int in [0, 9223372036854775807]"),
])
def test_simulate_errors_name_the_argument(argv, word, capsys):
    assert main(["simulate", "--shape", "64x64"] + argv if "--matrix" not in argv
                else ["simulate"] + argv) == 2
    assert word in capsys.readouterr().err


# -- bad command lines -------------------------------------------------------------------------
def run(argv, capsys):
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _good_npz(tmp_path):
    p = tmp_path / "w.npz"
    sp.save_npz(p, sp.random(30, 20, density=0.2, format="csr", random_state=0))
    return p


def _corrupt_csr_npz(tmp_path):
    W = sp.random(30, 20, density=0.2, format="csr", random_state=0)
    W.indptr[3] = 10**6
    p = tmp_path / "c.npz"
    np.savez(p, indptr=W.indptr, indices=W.indices, data=W.data, shape=np.array(W.shape),
             format=np.array("csr"))
    return p


def _file(name, content: bytes):
    def make(tmp_path):
        p = tmp_path / name
        p.write_bytes(content)
        return p
    return make


def _truncated(suffix):
    def make(tmp_path):
        src = tmp_path / f"full{suffix}"
        W = sp.random(30, 20, density=0.2, format="coo", random_state=0)
        sp.save_npz(src, W.tocsr()) if suffix == ".npz" else scipy.io.mmwrite(src, W)
        data = src.read_bytes()
        p = tmp_path / f"t{suffix}"
        p.write_bytes(data[: len(data) // 2])
        return p
    return make


def _npy_renamed(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(3))
    p = tmp_path / "a.npz"
    (tmp_path / "a.npy").rename(p)
    return p


def _plain_npz(tmp_path):
    p = tmp_path / "p.npz"
    np.savez(p, a=np.ones(3))
    return p


BAD_MATRIX_FILES = {
    "missing": (lambda t: t / "missing.npz", "--matrix file not found"),
    "directory": (lambda t: t, "is not a regular file"),
    "empty_npz": (_file("e.npz", b""), r"is not a scipy.sparse .npz .*EOFError"),
    "truncated_npz": (_truncated(".npz"), r"is not a scipy.sparse .npz .*BadZipFile"),
    "garbage_npz": (_file("g.npz", b"hello"), "is not a scipy.sparse .npz"),
    "npy_as_npz": (_npy_renamed, "is not a scipy.sparse .npz"),
    "npz_without_matrix": (_plain_npz, "does not contain a sparse array"),
    "corrupt_csr_npz": (_corrupt_csr_npz, "--matrix has a corrupt compressed structure"),
    "empty_mtx": (_file("e.mtx", b""), "is not a Matrix Market file"),
    "truncated_mtx": (_truncated(".mtx"), "is not a Matrix Market file.*Truncated"),
    "text_file": (_file("w.txt", b"1 2\n3 4\n"), "is not a Matrix Market file"),
    "mtx_index_out_of_range": (_file("b.mtx", b"%%MatrixMarket matrix coordinate real general\n"
                                              b"3 3 1\n5 5 1.0\n"), "out of bounds"),
    "mtx_zero_shape": (_file("z.mtx", b"%%MatrixMarket matrix coordinate real general\n0 0 0\n"),
                       "--matrix must have at least one row and one column"),
}


@pytest.mark.parametrize("how", sorted(BAD_MATRIX_FILES))
def test_simulate_bad_matrix_files(tmp_path, capsys, how):
    make, msg = BAD_MATRIX_FILES[how]
    rc, out, err = run(["simulate", "--matrix", str(make(tmp_path)), "--tokens", "8"], capsys)
    assert rc == 2 and out == ""
    assert err.startswith("wsesparse simulate: error: ") and err.count("\n") == 1, err
    assert re.search(msg, err), err


@pytest.mark.parametrize("content", [
    np.ones((3, 4)),                                              # dense array format
    sp.random(6, 5, density=0.4, random_state=1, format="coo") * 1j,   # complex values
], ids=["dense_mtx", "complex_mtx"])
def test_simulate_matrix_market_variants(tmp_path, capsys, content):
    p = tmp_path / "m.mtx"
    scipy.io.mmwrite(p, content)
    rc, out, err = run(["simulate", "--matrix", str(p), "--tokens", "8", "--json"], capsys)
    assert rc == 0 and err == ""
    assert '"nnz": %d' % np.count_nonzero(content.toarray() if sp.issparse(content)
                                           else content) in out


def test_simulate_pattern_mtx_and_good_npz(tmp_path, capsys):
    p = tmp_path / "p.mtx"
    p.write_bytes(b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n3 2\n")
    assert run(["simulate", "--matrix", str(p), "--tokens", "8", "--json"], capsys)[0] == 0
    assert run(["simulate", "--matrix", str(_good_npz(tmp_path)), "--tokens", "8"],
               capsys)[0] == 0


@pytest.mark.parametrize("argv,msg", [
    (["--shape", "0x5"], "--shape needs positive sizes"),
    (["--shape", "3x5x6"], "--shape must look like MxK"),
    (["--shape", "3.5x5"], "--shape must look like MxK"),
    (["--shape", "x"], "--shape must look like MxK"),
    (["--sparsity", "nan"], r"--sparsity must be a number in \[0, 1\), got nan"),
    (["--sparsity", "-0.5"], r"sparsity must be a number in \[0, 1\)"),
    (["--sparsity", "inf"], r"sparsity must be a number in \[0, 1\)"),
    (["--tokens", "-8"], "--tokens must be a positive int, got -8"),
    (["--tokens", str(10**30)], "--tokens 1000000000000000000000000000000 is too large"),
    (["--engines", "0"], "engines must be a positive int"),
    (["--engines", "9", "--tokens", "8"], r"engines \(9\) exceeds n_tokens \(8\)"),
    (["--seed", "-1"], r"seed must be an int in \[0, 9223372036854775807\], got -1"),
    (["--shape", f"{2**40}x{2**40}", "--sparsity", "0.999999"], r"n_in must be < 2\*\*31"),
])
def test_simulate_bad_values(capsys, argv, msg):
    args = ["simulate", "--shape", "30x30", "--tokens", "8"] + argv
    rc, out, err = run(args, capsys)
    assert rc == 2 and err.startswith("wsesparse simulate: error: ")
    assert re.search(msg, err), err


def test_simulate_plot_to_missing_directory(tmp_path, capsys):
    rc, out, err = run(["simulate", "--shape", "30x30", "--tokens", "8", "--plot",
                        str(tmp_path / "no" / "dir.png")], capsys)
    assert rc == 2 and "No such file or directory" in err


@pytest.mark.parametrize("argv", [["--tokens", "abc"], ["--machine", "wse9"],
                                  ["--dtype", "int8"], ["--balance", "best"], ["--shape"]])
def test_simulate_argparse_rejects(capsys, argv):
    """Types and choices argparse checks itself: usage message and exit status 2."""
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--shape", "30x30"] + argv)
    assert e.value.code == 2
    assert "wsesparse simulate: error: argument" in capsys.readouterr().err

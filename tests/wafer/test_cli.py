import json

import pytest
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
    (["--sparsity", "1.5"], "sparsity"), (["--tokens", "0"], "n_tokens"),
])
def test_simulate_errors_name_the_argument(argv, word, capsys):
    assert main(["simulate", "--shape", "64x64"] + argv if "--matrix" not in argv
                else ["simulate"] + argv) == 2
    assert word in capsys.readouterr().err

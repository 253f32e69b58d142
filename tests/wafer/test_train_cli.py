"""``wsesparse train``: a whole training run on the command line."""

import json

import pytest

from wsesparse.cli import main
from wsesparse.wafer.cli import model_config, parse_count


def test_train_report(capsys):
    assert main(["train", "--model", "125M", "--sparsity", "0.9", "--engines", "4",
                 "--tokens", "1e9", "--psum", "seed"]) == 0
    out = capsys.readouterr().out
    for word in ("GPT-3 125M", "seed reading", "vs dense", "decoder layer x 12", "estimator time"):
        assert word in out


def test_train_table_and_json(capsys):
    assert main(["train", "--model", "350M", "--engines", "1,8", "--sparsity", "0.75"]) == 0
    out = capsys.readouterr().out
    assert "efficiency" in out and "main bound" in out
    assert main(["train", "--model", "125M", "--engines", "2", "--json", "--batch", "250k"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["engines"] == 2 and d["batch_tokens"] == 250_000 and d["psum"] == "fabric"
    assert d["config"]["n_layers"] == 12 and d["layers"][0]["name"] == "decoder layer"


def test_model_and_count_parsing():
    assert model_config("175B").n_layers == 96
    assert model_config("GPT-3 1.3B").d_model == 2048
    assert model_config("1T").n_params == pytest.approx(1e12, rel=0.05)
    assert parse_count("300B", "--tokens") == 3e11


@pytest.mark.parametrize("argv,word", [
    (["--engines", "193"], "max_engines"), (["--engines", "x"], "--engines"),
    (["--tokens", "lots"], "--tokens"), (["--model", "huge"], "--model"),
    (["--sparsity", "1"], "sparsity"),
])
def test_train_errors_name_the_argument(argv, word, capsys):
    assert main(["train", "--model", "125M"] + argv) == 2
    assert word in capsys.readouterr().err


def test_max_engines_override(capsys):
    assert main(["train", "--model", "125M", "--engines", "256", "--max-engines", "256"]) == 0

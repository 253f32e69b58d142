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


def test_train_table_speedup_over_the_fewest_engines(capsys):
    """Speedup and efficiency are over the fewest engines listed, whatever the order (the
    first count listed was taken to scale perfectly: 16,1 showed 16x at 16 engines)."""
    from wsesparse.wafer.training import TransformerConfig, estimate_training
    assert main(["train", "--model", "125M", "--sparsity", "0.9", "--tokens", "1e9",
                 "--engines", "16,1"]) == 0
    rows = {int(line.split()[0]): line.split() for line in capsys.readouterr().out.splitlines()
            if line.split() and line.split()[0] in ("1", "16")}
    cfg = TransformerConfig.gpt3("125M")
    t1, t16 = (estimate_training(cfg, tokens=1e9, engines=e, sparsity=0.9).seconds
               for e in (1, 16))
    assert rows[1][3] == "1x" and float(rows[1][4]) == 1.0
    assert float(rows[16][3].rstrip("x")) == pytest.approx(t1 / t16, rel=1e-2)
    assert float(rows[16][4]) == pytest.approx(t1 / t16 / 16, abs=1e-3)
    assert main(["train", "--model", "125M", "--sparsity", "0.9", "--engines", "4,2"]) == 0
    out = capsys.readouterr().out
    assert "over 2 engines" in out


def test_model_and_count_parsing():
    assert model_config("175B").n_layers == 96
    assert model_config("GPT-3 1.3B").d_model == 2048
    assert model_config("1T").n_params == pytest.approx(1e12, rel=0.05)
    assert parse_count("300B", "--tokens") == 3e11
    # Any case names the paper model ('1.3b' ran a scaled 1.3e9-parameter model with 19
    # layers and d_model 2432); other words get an error listing the names.
    assert model_config("1.3b").d_model == 2048 and model_config("gpt-3 175b").n_layers == 96
    with pytest.raises(ValueError, match=r"GPT-3 paper model \(125M, .*175B\) or a"):
        model_config("foo")


@pytest.mark.parametrize("argv,word", [
    (["--engines", "193"], "--engines must be between 1 and the machine's 192 (--max-engines)"),
    (["--engines", "0"], "--engines must be between 1"), (["--engines", "x"], "--engines"),
    (["--tokens", "lots"], "--tokens"), (["--model", "huge"], "--model"),
    (["--sparsity", "1"], "--sparsity must be"),
    (["--max-engines", "0"], "--max-engines must be a positive int, got 0"),
    # (a review: these named n_params and batch_tokens, and "1,,2" ran engines 1 and 2)
    (["--model", "1e3"], "--model must count at least 1e6 parameters (1M), got '1e3'"),
    (["--batch", "100", "--engines", "192"],
     "--batch (100) must give every engine at least one token, got --engines 192"),
    (["--engines", "1,,2"], "--engines must be comma-separated ints, got '1,,2'"),
])
def test_train_errors_name_the_argument(argv, word, capsys):
    assert main(["train", "--model", "125M"] + argv) == 2
    assert word in capsys.readouterr().err


def test_max_engines_override(capsys):
    assert main(["train", "--model", "125M", "--engines", "256", "--max-engines", "256"]) == 0


@pytest.mark.parametrize("batch", ["0.5", "1.5"])
def test_train_batch_must_be_whole(capsys, batch):
    """(0.5 was cut to 0 and named 'batch_tokens'; 1.5 was cut to 1 silently.)"""
    assert main(["train", "--model", "125M", "--batch", batch]) == 2
    assert f"--batch must be a whole number of tokens, got '{batch}'" in capsys.readouterr().err


def test_counts_out_of_range_and_memory_errors_are_messages(capsys):
    """--batch 1e400 overflowed to inf and int() raised OverflowError with a traceback; a
    weight matrix too big for memory gave the MemoryError's traceback; 1e+9 was refused."""
    assert parse_count("1e+9", "--tokens") == 1e9
    assert main(["train", "--model", "125M", "--batch", "1e400"]) == 2
    assert "--batch must be finite, got '1e400'" in capsys.readouterr().err
    assert main(["simulate", "--shape", "100000x100000", "--sparsity", "0", "--tokens", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wsesparse simulate: error: ") and "memory" in err


def test_train_model_beyond_memory_or_index_range_is_a_message(capsys, monkeypatch):
    """--model 1e18 passed random_weights' check of its pattern (8 bytes a nonzero), then the
    estimates' copies of it took 4.5x that and the process was killed; --model 1e300 named
    random_weights' n_in."""
    from wsesparse import _checks
    from wsesparse.wafer import training
    monkeypatch.setattr(_checks, "available_memory", lambda: 1 << 20)
    training._matrix_phases.cache_clear()
    assert main(["train", "--model", "125M"]) == 2
    assert "(the pattern and its copies) needs" in capsys.readouterr().err
    monkeypatch.undo()
    assert main(["train", "--model", "1e300"]) == 2
    err = capsys.readouterr().err
    assert "the model is too large to estimate" in err and "n_in" not in err

"""benchmarks/peers.py, the thin wrapper of ``wsesparse bench``, prints the same table."""

from wsesparse.cli import main


def test_peers_script_is_the_same_command(no_peers, capsys):
    from benchmarks import peers
    args = ["--sizes", "64", "--tokens", "1,3", "--densities", "0.3", "--dtypes", "float32",
            "--no-triad", "--budget", "0.002", "--repeats", "1", "--threads", "1"]
    assert peers.main(args) == 0
    script = capsys.readouterr().out
    assert main(["bench", *args]) == 0
    cli = capsys.readouterr().out
    # Same lines apart from the measured numbers: compare the table's shape and labels.
    def shape(text):
        return [(ln.split("|")[0], len(ln.split("|"))) for ln in text.splitlines()
                if "|" in ln]
    assert shape(script) == shape(cli) and len(shape(cli)) == 3
    assert peers.random_csr is __import__("wsesparse.bench").bench.random_csr  # crossover.py

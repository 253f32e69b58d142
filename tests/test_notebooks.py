"""Execute every notebook in notebooks/ in small mode (WSESPARSE_SMALL=1).

The notebooks are jupytext percent-format ``.py`` files; each is read with
jupytext and run cell by cell in a real Jupyter kernel by nbclient, so a cell
that raises fails the test. Each must write its PNG figures to
``$WSESPARSE_FIGURES``.
"""

import os
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EXPECTED = {
    "sparsity_to_speedup.py": ["sparsity_to_speedup.png", "speedup_vs_batch.png"],
    "cluster_scaling.py": ["cluster_scaling.png"],
    "cpu_speedup.py": ["cpu_speedup.png"],
    "load_balancing.py": ["load_balancing.png"],
    "tlr_mvm.py": ["tlr_rank_map.png", "tlr_accuracy_storage.png", "tlr_bandwidth.png"],
}


def test_every_notebook_is_listed():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_small(name, tmp_path, monkeypatch):
    nb = jupytext.read(NOTEBOOKS / name)
    assert any(c.cell_type == "markdown" for c in nb.cells)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    monkeypatch.setenv("WSESPARSE_SMALL", "1")
    monkeypatch.setenv("WSESPARSE_FIGURES", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # The kernel imports wsesparse from this checkout even without an install.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    for fig in EXPECTED[name]:
        png = tmp_path / fig
        assert png.exists(), f"{name} did not write {fig}"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000

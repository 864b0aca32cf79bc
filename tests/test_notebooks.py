"""The example notebooks in notebooks/: each runs top to bottom (small sizes), and the
committed copies carry their outputs, plots included.

Each notebook is executed with nbclient in a temporary copy of notebooks/ with
BEDL_NB_SMALL=1 (the notebooks shrink their sizes; about 5-30 s each) and the repository
root on the kernel's PYTHONPATH, so the checkout is tested even where the package is not
installed. Skipped where nbclient, nbformat or ipykernel are missing.
"""
import os
import pathlib
import shutil

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REPO = pathlib.Path(__file__).resolve().parents[1]
NB_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 300


def test_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    assert len(names) >= 4, names
    readme = (NB_DIR / "README.md").read_text(encoding="utf-8")
    for name in names:
        assert name in readme, f"notebooks/README.md does not mention {name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_has_outputs(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "no code cells"
    unexecuted = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    assert not unexecuted, f"code cells without saved execution: {unexecuted}"
    outputs = [o for c in code for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors, f"saved outputs contain errors: {[e.get('ename') for e in errors]}"
    assert any("image/png" in o.get("data", {}) for o in outputs), "no embedded PNG plot in the saved outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch):
    work = tmp_path / "notebooks"
    shutil.copytree(NB_DIR, work)
    nb = nbformat.read(work / path.name, as_version=4)
    # The kernel inherits the environment at launch.
    monkeypatch.setenv("BEDL_NB_SMALL", "1")
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + pythonpath if pythonpath else ""))
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        allow_errors=False,
        record_timing=False,
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert "small mode: True" in "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")

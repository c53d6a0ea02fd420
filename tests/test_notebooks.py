"""Every notebook in notebooks/ runs top to bottom (its cells assert what they show).

The code cells are executed in one namespace, in order, without a Jupyter kernel,
so the test needs no notebook tooling. Figures are drawn with matplotlib's Agg
backend (nothing is shown); matplotlib is in the test extra, so a notebook that
needs it fails, rather than skips, where it is missing. Each notebook prints how long it took (see it with ``-s``; CI keeps
every notebook well under a minute).
"""
import json
import pathlib
import sys
import time

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


def _code(path):
    cells = json.loads(path.read_text())["cells"]
    return [(number, "".join(cell["source"])) for number, cell in enumerate(cells)
            if cell["cell_type"] == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs(path):
    code = _code(path)
    if any("matplotlib" in source for _, source in code):
        import matplotlib  # the test extra installs it
        matplotlib.use("Agg")
    namespace = {"__name__": "__notebook__"}
    start = time.perf_counter()
    try:
        for number, source in code:
            exec(compile(source, f"{path.name}[cell {number}]", "exec"), namespace)
    finally:
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")
    print(f"{path.name}: {time.perf_counter() - start:.1f} s")


def test_notebooks_have_no_saved_outputs():
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, path.name

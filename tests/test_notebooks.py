"""Every notebook in notebooks/ runs top to bottom (its cells assert what they show).

The code cells are executed in one namespace, in order, without a Jupyter kernel,
so the test needs no notebook tooling.
"""
import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs(path, capsys):
    cells = json.loads(path.read_text())["cells"]
    namespace = {"__name__": "__notebook__"}
    for number, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            exec(compile(source, f"{path.name}[cell {number}]", "exec"), namespace)

"""The examples of README.md and docs/*.md run as doctests: a page that shows
code a user copies must show what that code prints."""
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# pages of an optional adapter: the library they import (in the test extra: a missing one fails, not skips)
NEEDS = {"torch.md": "torch", "dask.md": "dask"}


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_page_examples(page):
    if page.name in NEEDS:
        importlib.import_module(NEEDS[page.name])
    result = doctest.testfile(str(page), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{page.name} has no example"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {page.name} fail"

"""`make test`'s later phases collect only the files that name their markers (Makefile, ALONE); tests/conftest.py
refuses a marked test whose file does not."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest

REPO = Path(__file__).resolve().parent.parent


def _item(path: Path, *markers: str):
    return SimpleNamespace(
        path=path,
        nodeid=f"{path.name}::t",
        fixturenames=(),
        iter_markers=lambda: [SimpleNamespace(name=m) for m in markers],
    )


def test_a_marked_test_in_a_file_that_does_not_name_its_marker_is_refused(tmp_path):
    hidden = tmp_path / "test_hidden.py"
    hidden.write_text("from tests.helpers import ALONE_MARK\n\n@ALONE_MARK\ndef test_x():\n    pass\n")
    with pytest.raises(pytest.UsageError, match="test_hidden.py::t: marked serial or multiprocess"):
        conftest.pytest_itemcollected(_item(hidden, "multiprocess"))
    named = tmp_path / "test_named.py"
    named.write_text("import pytest\n\n@pytest.mark.serial\ndef test_x():\n    pass\n")
    conftest.pytest_itemcollected(_item(named, "serial"))  # named: collected by the phase
    conftest.pytest_itemcollected(_item(hidden))  # unmarked: the parallel phase collects every file


def test_the_makefile_greps_the_words_the_check_reads():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    (line,) = [x for x in makefile.splitlines() if x.startswith("ALONE =")]
    assert line == 'ALONE = $(shell grep -l -w -E "serial|multiprocess" tests/test_*.py)'
    assert conftest.ALONE.pattern == r"\b(serial|multiprocess)\b"
    assert makefile.count("$(ALONE)") == 3 and re.search(r"-m serial .*\$\(ALONE\)", makefile)

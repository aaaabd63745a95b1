"""loaded_after: the fresh-interpreter import probe the "stays light" tests rely on."""

from __future__ import annotations

import subprocess

import pytest
from fermix_core.testing import loaded_after


def test_it_names_what_the_code_imported_and_only_that() -> None:
    assert loaded_after("import json\nprint('noise')", ["json", "tomllib", "json"]) == ["json"]
    assert loaded_after("pass", ["tomllib", "xml.dom"]) == []


def test_code_that_fails_raises_with_its_error() -> None:
    with pytest.raises(subprocess.CalledProcessError) as raised:
        loaded_after("import not_a_module_anywhere", ["json"])
    assert "not_a_module_anywhere" in raised.value.stderr

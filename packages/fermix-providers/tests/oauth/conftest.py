"""Fixtures for the OAuth tests: the fake issuer (see ``fake_issuer.py``) on a real socket."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_MODULE = "fermix_providers_tests_fake_issuer"


def load_fake_issuer() -> Any:
    """The helper module, loaded once by path (test directories are not packages)."""
    if _MODULE not in sys.modules:
        path = Path(__file__).with_name("fake_issuer.py")
        spec = importlib.util.spec_from_file_location(_MODULE, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[_MODULE] = module
        spec.loader.exec_module(module)
    return sys.modules[_MODULE]


@pytest.fixture
def fake_issuer() -> Iterator[Any]:
    with load_fake_issuer().running() as issuer:
        yield issuer


@pytest.fixture
def xai_issuer(fake_issuer: Any) -> Any:
    """The fake issuer with xAI's endpoint paths."""
    fake_issuer.authorize_path = "/oauth2/authorize"
    fake_issuer.token_path = "/oauth2/token"
    return fake_issuer

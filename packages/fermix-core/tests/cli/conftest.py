from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _restore_logging():
    """``run()`` configures process-wide logging and crash hooks; undo it after each test."""
    yield
    from fermix_core.logs import teardown_logging

    teardown_logging()

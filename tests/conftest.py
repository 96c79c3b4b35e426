"""Shared test plumbing: where ../shared is, and what happens when it is missing.

A fresh clone without ../shared skips the tests that need it, with a reason; CI
(CI=true) always has it, so there a missing ../shared fails instead of skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
SHARED_LIBRARY = CORPUS / "calibre-library"
LOCAL_FILES = CORPUS / "local-files"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def require_shared() -> Path:
    """Return ../shared/corpus, or skip (fail under CI) when it is not beside the checkout."""
    if CORPUS.is_dir():
        return CORPUS
    message = f"needs the shared corpus at {CORPUS} (not present in this checkout)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def shared_corpus() -> Path:
    return require_shared()

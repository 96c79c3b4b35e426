"""Fixtures of the ingest tests: the generated bad and good books, and the corpus manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ingest.helpers import FIXTURE_BOOKS, make_books_module


@pytest.fixture(scope="session")
def fixture_books() -> dict[str, Path]:
    """The files of tests/fixtures/books by name, as make_books.py writes them."""
    return {name: FIXTURE_BOOKS / name for name in make_books_module().MAKERS}


@pytest.fixture
def manifest(shared_corpus: Path) -> dict[str, Any]:
    """The corpus manifest: every book's TOC entries and word counts (skips when ../shared is missing)."""
    return json.loads((shared_corpus / "manifest.json").read_text())

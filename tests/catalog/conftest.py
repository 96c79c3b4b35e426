"""The libraries the catalog tests run on: Calibre's own (../shared) and the project's fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import expected
from catalog.scratch import copy_library


@pytest.fixture(params=["shared", "fixture"])
def library_name(request: pytest.FixtureRequest) -> str:
    """Each test runs on both libraries; the shared one is skipped (with the reason) when missing."""
    if request.param == "shared":
        request.getfixturevalue("shared_corpus")
    return request.param


@pytest.fixture
def library_root(library_name: str) -> Path:
    return expected.LIBRARIES[library_name]


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Path:
    """A scratch copy of the fixture library."""
    return copy_library(expected.LIBRARIES["fixture"], tmp_path / "library")

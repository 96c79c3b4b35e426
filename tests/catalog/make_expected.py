"""Record what Calibre itself says about a library, as the catalog tests' expected data.

    .venv/bin/python tests/catalog/make_expected.py [shared] [fixture]

runs `calibredb list --for-machine` (Calibre's own reader, not ours) on a scratch copy of
the library (Calibre may write to a library it opens; the originals stay untouched) and
writes tests/catalog/expected_<name>_library.json: one row per book with the fields the
catalog serves, format paths made relative to the library folder. Needs Calibre's
command-line tools (`apt-get install -y --no-install-recommends calibre`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from alexandria_stack.layout import SAMPLE_LIBRARY

HERE = Path(__file__).resolve().parent
LIBRARIES = {
    "shared": HERE.parents[2] / "shared" / "corpus" / "calibre-library",
    "fixture": SAMPLE_LIBRARY,
}
FIELDS = (
    "title,authors,author_sort,formats,identifiers,isbn,languages,pubdate,publisher,"
    "rating,series,series_index,tags,uuid"
)


def expected_path(name: str) -> Path:
    """Where the expected data of library `name` ("shared" or "fixture") is kept."""
    return HERE / f"expected_{name}_library.json"


def calibredb_rows(library: Path) -> list[dict]:
    """`calibredb list --for-machine` of a scratch copy of `library`, sorted by id, paths relative."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "library"
        shutil.copytree(library, copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)  # the shared corpus is read-only
        env = dict(os.environ)
        if os.geteuid() == 0:
            env.setdefault("QTWEBENGINE_CHROMIUM_FLAGS", "--no-sandbox")
        output = subprocess.run(
            ["calibredb", "list", "--library-path", str(copy), "--for-machine", "--fields", FIELDS],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
        rows = sorted(json.loads(output), key=lambda row: row["id"])
        for row in rows:
            row["formats"] = [Path(p).relative_to(copy).as_posix() for p in row.get("formats", [])]
    return rows


def main(names: list[str]) -> None:
    for name in names or list(LIBRARIES):
        rows = calibredb_rows(LIBRARIES[name])
        expected_path(name).write_text(json.dumps(rows, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"{expected_path(name)}: {len(rows)} books", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])

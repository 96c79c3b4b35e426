"""Local files: the only paths the local-file tools may touch, and what they list.

Every path is resolved (symlinks and `..` followed) before it is checked against
the allowed roots, so a link inside a root pointing outside it is refused too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from alexandria.book_formats import SUPPORTED, BookFormat
from alexandria.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from alexandria.settings import IngestSettings

BYTES_PER_MB = 1024 * 1024
# Linux's limits (NAME_MAX, PATH_MAX): a longer name cannot exist, and asking the OS about it fails.
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4096


@dataclass(frozen=True)
class LocalFile:
    name: str
    size_mb: float
    format: BookFormat
    full_path: str


def check_length(raw: str) -> None:
    """Refuse a path that no file can have, before the OS is asked about it (it answers with an OSError)."""
    if len(os.fsencode(raw)) > PATH_MAX_BYTES:
        raise InvalidArgument(f"The path is over {PATH_MAX_BYTES} bytes long, which no file can have; check it.")
    for part in Path(raw).parts:
        if len(os.fsencode(part)) > NAME_MAX_BYTES:
            raise InvalidArgument(
                f"The path has a name over {NAME_MAX_BYTES} bytes long ('{part[:40]}...'), which no file or folder "
                "can have; check the path."
            )


@dataclass(frozen=True)
class LocalRoots:
    roots: tuple[Path, ...]
    max_file_bytes: int

    @classmethod
    def from_settings(cls, settings: IngestSettings) -> LocalRoots:
        configured = [settings.local_ingest_path, *settings.local_ingest_extra_roots]
        roots = tuple(p.expanduser().resolve() for p in configured if p is not None)
        return cls(roots, int(settings.ingest_max_file_mb * BYTES_PER_MB))

    def _describe(self) -> str:
        return ", ".join(str(r) for r in self.roots)

    def _resolve(self, raw: str) -> Path:
        if not self.roots:
            raise FailedPrecondition(
                "No local folder is configured: set LOCAL_INGEST_PATH (and optionally LOCAL_INGEST_EXTRA_ROOTS) "
                "to the folders Alexandria may read."
            )
        if "\x00" in raw:
            raise InvalidArgument("The path contains a NUL character.")
        check_length(raw)
        candidate = Path(raw).expanduser()
        if not candidate.is_absolute():
            candidate = self.roots[0] / candidate
        resolved = candidate.resolve()
        if not any(resolved == root or resolved.is_relative_to(root) for root in self.roots):
            raise PermissionDenied(
                f"Permission denied: '{raw}' is outside the allowed folders ({self._describe()}). "
                "Move the file into one of them or add its folder to LOCAL_INGEST_EXTRA_ROOTS."
            )
        return resolved

    def directory(self, raw: str | None) -> Path:
        """The folder to browse: the first root when none is given."""
        path = self._resolve(raw) if raw else self._resolve(str(self.roots[0]) if self.roots else "")
        if not path.exists():
            raise NotFound(f"Folder not found: {path}")
        if not path.is_dir():
            raise InvalidArgument(f"Not a folder: {path}; pass a folder to browse, or use alexandria_ingest_file.")
        return path

    def file(self, raw: str) -> tuple[Path, BookFormat]:
        """A readable, supported, not-too-large file inside the roots, with its format."""
        if not raw or not raw.strip():
            raise InvalidArgument(f"file_path is empty: pass the path of a book file ({SUPPORTED}).")
        path = self._resolve(raw.strip())
        if not path.exists():
            raise NotFound(f"File not found: {path}. Use alexandria_browse_local to list the files available.")
        if not path.is_file():
            raise InvalidArgument(f"Not a file: {path}.")
        fmt = BookFormat.of_file(path)
        size = path.stat().st_size
        if size > self.max_file_bytes:
            raise InvalidArgument(
                f"{path.name} is {size / BYTES_PER_MB:.1f} MB, over the {self.max_file_bytes / BYTES_PER_MB:.0f} MB "
                "limit (INGEST_MAX_FILE_MB)."
            )
        return path, fmt

    def browse(self, raw: str | None, recursive: bool) -> tuple[Path, list[LocalFile]]:
        folder = self.directory(raw)
        candidates = folder.rglob("*") if recursive else folder.iterdir()
        files = []
        for path in sorted(candidates):
            fmt = BookFormat.by_extension(path)
            if fmt is None or not path.is_file():
                continue
            try:
                real = self._resolve(str(path))
            except PermissionDenied:
                continue  # a link leading out of the roots is not offered
            files.append(LocalFile(path.name, round(real.stat().st_size / BYTES_PER_MB, 3),
                                   fmt, str(path)))
        return folder, files

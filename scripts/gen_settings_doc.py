"""Write docs/configuration.md from the settings classes in alexandria/settings.py (the only writer).

Usage: python scripts/gen_settings_doc.py [--check]
tests/test_settings.py fails when the committed page differs from a fresh run of this script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from alexandria import settings

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"

INTRO = """# Configuration

Every setting is an environment variable, read once when a process starts. `alexandria up` hands them to the
processes it starts; with docker-compose, set them in the shell or `.env` beside `docker-compose.yml`. A value
that cannot work is refused before anything starts, in one line naming the variable and what it accepts
(`alexandria status` shows the same without starting anything).

This page is generated from `alexandria/settings.py` by `python scripts/gen_settings_doc.py`; do not edit it by
hand.
"""

TITLES = {
    "DataDirSettings": "Where things live",
    "CommonSettings": "Every process",
    "CatalogSettings": "The Calibre library",
    "IngestSettings": "Ingest, local files and the automatic sync",
    "EmbedderSettings": "The model",
    "HubSettings": "Models by Hugging Face id",
    "StoreSettings": "The store (Qdrant)",
    "QuerySettings": "Answers: guardians and links",
    "GatewaySettings": "The MCP gateway",
    "AddressSettings": "Service addresses (services run apart, or the CLI against another stack)",
}


def _type(annotation: Any) -> str:
    """A field's type as a reader says it: `fast, best or auto`, `path`, `list of path`."""
    arguments = [a for a in get_args(annotation) if a is not type(None)]
    origin = get_origin(annotation)
    if origin is Literal:
        words = [f"`{a}`" for a in arguments]
        return ", ".join(words[:-1]) + " or " + words[-1]
    if origin is list:
        return "list of " + _type(arguments[0])
    if origin is dict:
        return "JSON object"
    if arguments:  # X | None
        return _type(arguments[0]) if len(arguments) == 1 else " or ".join(map(_type, arguments))
    names = {bool: "true or false", int: "integer", float: "number", str: "text", SecretStr: "secret text"}
    return names.get(annotation, "path" if annotation is Path else getattr(annotation, "__name__", str(annotation)))


def _default(info: FieldInfo) -> str:
    value: Any = info.default
    if value is PydanticUndefined:
        value = info.default_factory() if info.default_factory else None  # type: ignore[call-arg]
    if value is None or value in ([], {}):
        return "unset"
    if isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, Path) and value.is_absolute():
        value = value.relative_to(ROOT) if value.is_relative_to(ROOT) else value
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value}`"


def render() -> str:
    lines = [INTRO]
    sections: dict[str, list[str]] = {}
    for variable, declaring, info in settings.environment_settings():
        row = f"| `{variable}` | {_type(info.annotation)} | {_default(info)} | {info.description or ''} |"
        sections.setdefault(declaring.__name__, []).append(row)
    count = sum(len(rows) for rows in sections.values())
    lines.append(f"{count} settings in all.\n")
    for name, rows in sections.items():
        lines += [f"## {TITLES[name]}\n", "| variable | type | default | what it does |", "|---|---|---|---|",
                  *rows, ""]
    lines += ["## Tuned constants (not settings)\n",
              ("Fixed in code beside the settings they belong to; no environment variable sets them. A benchmark "
               "turns some through its own flags (`bench/README.md`), the launcher passes `--listen` to the "
               "services it starts.\n"),
              "| constant | value | why |", "|---|---|---|"]
    for cls in (settings.StoreSettings, settings.EmbedderSettings, settings.IngestSettings, settings.QuerySettings,
                settings.GatewaySettings, settings.CatalogSettings):
        for name, info in cls.model_fields.items():
            if not settings.is_environment_setting(info) and info.description and name in cls.__annotations__:
                lines.append(f"| `{cls.__name__}.{name}` | {_default(info)} | {info.description} |")
    lines.append("| `ClientSettings` | deadlines and retries of every gRPC call | tests shorten them |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale, write nothing")
    fresh = render()
    if parser.parse_args().check:
        sys.exit(0 if PAGE.is_file() and PAGE.read_text() == fresh else 1)
    PAGE.parent.mkdir(exist_ok=True)
    PAGE.write_text(fresh)


if __name__ == "__main__":
    main()

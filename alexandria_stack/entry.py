"""The `alexandria` command's entry point: bad settings are refused before the CLI's heavier imports (gRPC,
the store, the protobuf modules), so the refusal comes at once."""

from __future__ import annotations

import sys

from alexandria.settings import settings_refusal


def refuse_bad_settings() -> None:
    """Exit 2, saying which settings cannot work and what each accepts, before anything is started."""
    refusal = settings_refusal()
    if refusal is not None:
        print(refusal, file=sys.stderr)
        sys.exit(2)


def main() -> None:
    if not {"-h", "--help"} & set(sys.argv[1:]):
        refuse_bad_settings()
    from alexandria_stack.cli import main as cli_main

    cli_main()

"""The generated code in alexandria/v1 is exactly what scripts/gen_protos.py makes from protos/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "scripts" / "gen_protos.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    fresh = _load_generator().generate(tmp_path)
    committed_dir = ROOT / "alexandria" / "v1"
    committed = sorted(p.name for p in committed_dir.iterdir() if p.suffix in {".py", ".pyi"})
    assert [p.name for p in fresh] == committed, "run: python scripts/gen_protos.py"
    for path in fresh:
        assert path.read_text() == (committed_dir / path.name).read_text(), (
            f"alexandria/v1/{path.name} differs from the protos: run python scripts/gen_protos.py"
        )


def test_every_enum_starts_with_unspecified() -> None:
    from alexandria.v1 import catalog_pb2, embedder_pb2, ingest_pb2, query_pb2

    for module in (catalog_pb2, embedder_pb2, ingest_pb2, query_pb2):
        for enum in module.DESCRIPTOR.enum_types_by_name.values():
            assert enum.values[0].number == 0 and enum.values[0].name.endswith("_UNSPECIFIED"), enum.name

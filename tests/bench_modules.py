"""Loading a bench script (bench/*.py) as a module, for the tests of its building blocks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench_module(name: str) -> ModuleType:
    """bench/`name`.py as the module `bench_name`.

    A bench script imports its siblings by their plain names (`from query import ...`), and some of those
    names are test packages here (tests/query): while the script loads, such a name is bench's; after, the
    bench siblings leave sys.modules under those names (the script keeps its references) and the test
    package is put back, or can be imported later.
    """
    siblings = {path.stem for path in BENCH.glob("*.py")}
    shadowed = {
        module_name: sys.modules.pop(module_name)
        for module_name in list(sys.modules)
        if module_name.split(".")[0] in siblings and _folder(sys.modules[module_name]) != BENCH
    }
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
        for module_name in [m for m in sys.modules if m.split(".")[0] in siblings]:
            if _folder(sys.modules[module_name]) == BENCH:
                del sys.modules[module_name]
        sys.modules.update(shadowed)
    return module


def _folder(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).parent if file else None

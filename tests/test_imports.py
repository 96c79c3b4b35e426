"""No two of the project's own modules import each other, however far round: layers point one way."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("alexandria", "services", "gateway", "alexandria_stack")
GENERATED = ("alexandria.v1",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = _module_name(path)
            if not any(name == g or name.startswith(f"{g}.") for g in GENERATED):
                modules[name] = path
    return modules


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `module` imports anywhere in it (functions' own imports too); `from a import b` names
    the module a.b when there is one, else a."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
    return {name for name in found if name in modules and name != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (its modules in order, the first repeated at the end), None when it has none."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [(start, iter(sorted(graph[start])))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child):], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_the_project_has_no_import_cycle() -> None:
    modules = _project_modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    cycle = _cycle(graph)
    assert cycle is None, f"these modules import each other, in a circle: {' -> '.join(cycle)}"


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_a_module_imported_from_its_package_is_the_module() -> None:
    modules = _project_modules()
    factory = modules["alexandria.store.factory"]
    assert "alexandria.store.embedded" in _imported("alexandria.store.factory", factory, modules)
    assert "alexandria.store.embedded.shard_files" in _imported("alexandria.store.factory", factory, modules)


def test_every_bench_script_imports() -> None:
    """The benchmarks run by hand, not in CI: an import that breaks in a refactor would go unseen until the next
    measurement. Importing each (in one interpreter) costs seconds."""
    import importlib

    names = sorted({_module_name(path) for path in (ROOT / "bench").rglob("*.py")})
    for name in names:
        importlib.import_module(name)

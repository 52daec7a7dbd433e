"""The layering of DESIGN §2 and the house lint rules, checked on every test run."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

ALLOWED_CYCLES: list[set[str]] = []  # only shrinks (an entry that is no longer a cycle fails); now none


def test_import_layers_run_one_way():
    result = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run(
        [str(BIN / "ruff"), "check", "rlpipe", "tests", "benchmarks", "dvc_stages", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    result = subprocess.run(
        [str(BIN / "ruff"), "format", "--check", "rlpipe", "tests", "benchmarks", "dvc_stages", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _module_files() -> dict[str, Path]:
    """``{dotted module name: file}`` of every module of the package."""
    files = {}
    for path in (ROOT / "rlpipe").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The rlpipe modules ``module`` imports anywhere (top level, functions, ``if TYPE_CHECKING:``)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                base = ".".join([*package[: len(package) - node.level + 1], base]).rstrip(".")
            names.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
            )
    return {_owner(name, modules) for name in names if name.startswith("rlpipe")} - {module, None}


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` is, or is defined in (``rlpipe.a.b.Class`` → ``rlpipe.a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_cycles() -> list[set[str]]:
    """The strongly connected components of more than one module in rlpipe's import graph (Tarjan)."""
    modules = _module_files()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                cycles.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_import_cycles_are_only_the_allowed_ones_being_removed():
    cycles = import_cycles()
    assert [c for c in cycles if c not in ALLOWED_CYCLES] == []  # a new cycle: break it
    assert [c for c in ALLOWED_CYCLES if c not in cycles] == []  # gone or changed: update ALLOWED_CYCLES


def test_import_cycles_are_found_through_type_checking_and_function_imports(tmp_path, monkeypatch):
    package = tmp_path / "rlpipe"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rlpipe.sub.b import B\n"
    )
    (package / "sub" / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("from rlpipe.sub import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert import_cycles() == [{"rlpipe.sub.a", "rlpipe.sub.b"}]


def test_the_mlflow_and_zarr_contracts_name_every_other_top_level_module():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    top = {
        f"rlpipe.{p.stem}"
        for p in (ROOT / "rlpipe").iterdir()
        if (p.suffix == ".py" and p.stem not in ("__init__", "__main__")) or (p / "__init__.py").exists()
    }
    owners = {"mlflow": "rlpipe.tracking", "zarr": "rlpipe.artifacts"}
    for library, owner in owners.items():
        contract = next(c for c in contracts if c.get("forbidden_modules") == [library])
        assert set(contract["source_modules"]) == top - {owner}, library

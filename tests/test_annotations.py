"""Bare ``Any`` annotations in ``rlpipe/`` stay under a ceiling that only goes down; no ``policy: Any``.

An annotation counts when ``Any`` is the whole annotation or an arm of a top-level union: ``x: Any``,
``-> Any``, ``Any | None``, ``Optional[Any]`` (parameters, returns, annotated assignments and
fields; quoted annotations parsed too). ``Any`` nested in a subscript (``dict[str, Any]``,
``Callable[..., Any]``) does not count. ``python tests/test_annotations.py`` prints each one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_BARE_ANY = 60
"""Lower it when an ``Any`` goes; never raise it."""


def _union_arms(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_arms(node.left) + _union_arms(node.right)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("Optional", "Union")
    ):
        arms = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [arm for inner in arms for arm in _union_arms(inner)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _union_arms(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return [node]
    return [node]


def _is_bare_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    arms = _union_arms(annotation)
    names = [arm.id if isinstance(arm, ast.Name) else getattr(arm, "attr", None) for arm in arms]
    return "Any" in names


def _annotations(tree: ast.AST) -> Iterator[tuple[str, ast.expr | None, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            star = [arg for arg in (args.vararg, args.kwarg) if arg is not None]
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, *star]:
                yield arg.arg, arg.annotation, arg.lineno
            yield "return", node.returns, node.lineno
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "?")
            yield name, node.annotation, node.lineno


def bare_any() -> list[tuple[str, int, str]]:
    """``(file, line, name)`` of every bare ``Any`` annotation in ``rlpipe/``."""
    found = []
    for path in sorted((ROOT / "rlpipe").rglob("*.py")):
        for name, annotation, line in _annotations(ast.parse(path.read_text(), str(path))):
            if _is_bare_any(annotation):
                found.append((str(path.relative_to(ROOT)), line, name))
    return found


def test_bare_any_annotations_stay_under_the_ceiling() -> None:
    found = bare_any()
    assert len(found) <= MAX_BARE_ANY, f"{len(found)} bare Any annotations (at most {MAX_BARE_ANY}): {found}"


def test_no_policy_is_annotated_any() -> None:
    assert [f for f in bare_any() if f[2].lower().endswith("policy")] == []


if __name__ == "__main__":
    rows = bare_any()
    for file, line, name in rows:
        print(f"{file}:{line}: {name}")
    policy = sum(name.lower().endswith("policy") for _, _, name in rows)
    print(f"bare Any annotations: {len(rows)}; policy: Any: {policy}", file=sys.stderr)

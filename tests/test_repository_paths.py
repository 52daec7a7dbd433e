"""Every repository path that the package, pyproject.toml, the docs and the tests name exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PATH = re.compile(r"(?<![\w/.~$-])((?:rlpipe|benchmarks|configs|docs|tests|examples|dvc_stages)/[\w./-]*\w)")
"""A path from the repository root; not one inside another path (``data/runs/configs/x``, ``~/docs``)."""

NOT_IN_THE_REPOSITORY = {
    "benchmarks/results/new_bench.json": "written by the docs-site test itself",
    "benchmarks/results/gpu_vs_rsl_rl.json": "the output a GPU benchmark command writes",
    "docs/sample.md": "the name of an in-memory page in the README test",
    "examples/NAME": "a placeholder in a test id",
    "rlpipe/x": "a malformed Minari dataset id in a bad-input test",
    "rlpipe/push_cube_teacher_camera": "a LeRobot repo_id in the datasets page",
}

DATASET_ID = re.compile(r"-v\d+$")
"""A Minari dataset id (``rlpipe/<exp>/rollouts-v0``), not a path."""


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` names; a pattern (``configs/zoo/{name}.yaml``, ``*.png``) is none."""
    text = text.replace("\\.", ".")  # paths inside regular expressions
    return [
        m.group(1)
        for m in PATH.finditer(text)
        if text[m.end() : m.end() + 2].lstrip("/")[:1] not in ("{", "<", "*")
    ]


def _sources() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".md", ".py", ".yml", ".yaml")]
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name]  # its examples
    return [ROOT / "pyproject.toml", *(ROOT / "rlpipe").rglob("*.py"), *tests, *docs]


def test_every_named_repository_path_exists():
    dangling = [
        f"{source.relative_to(ROOT)}:{number}: {path}"
        for source in _sources()
        for number, line in enumerate(source.read_text().splitlines(), 1)
        for path in named_paths(line)
        if path not in NOT_IN_THE_REPOSITORY and not DATASET_ID.search(path) and not (ROOT / path).exists()
    ]
    assert dangling == []


def test_named_paths_are_found_in_code_prose_and_regular_expressions():
    text = (
        "see `rlpipe/fast.py`, (benchmarks/peers/scaling.py); r'^rlpipe run configs/go1\\.yaml$' "
        "data/runs/configs/x.yaml configs/zoo/{name}.yaml docs/*.md ~/docs/x.md"
    )
    assert named_paths(text) == ["rlpipe/fast.py", "benchmarks/peers/scaling.py", "configs/go1.yaml"]


def test_the_allowed_names_are_still_named_and_still_absent():
    named = {path for source in _sources() for path in named_paths(source.read_text())}
    assert sorted(p for p in NOT_IN_THE_REPOSITORY if p not in named or (ROOT / p).exists()) == []

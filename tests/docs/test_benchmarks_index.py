"""benchmarks/README.md is the one index: it lists every script under the folder that holds it."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_every_benchmark_script_is_listed_under_its_group():
    index = (BENCHMARKS / "README.md").read_text()
    sections = dict(re.findall(r"^## (\w+)/\n(.*?)(?=^## |\Z)", index, flags=re.M | re.S))
    scripts = sorted(p for p in BENCHMARKS.glob("*/*.py") if not p.name.startswith("_"))  # _name.py: helpers
    assert {p.parent.name for p in scripts} == {"speed", "learning", "peers", "profile"}
    missing = [
        f"{p.parent.name}/{p.name}"
        for p in scripts
        if f"| `{p.name}` |" not in sections.get(p.parent.name, "")
    ]
    assert not missing, f"benchmarks/README.md does not list: {missing}"
    top = [p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_")]  # zoo.py: its own section
    assert not [name for name in top if f"| `{name}` |" not in index], "benchmarks/README.md misses a script"
    listed = re.findall(r"^\| `(\w+\.py)` \|", index, flags=re.M)
    every = sorted([*(p.name for p in scripts), *top])
    assert sorted(listed) == every, "the index lists a script that does not exist"

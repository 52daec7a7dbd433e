"""The layering of DESIGN §2 and the house lint rules, checked on every test run."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_import_layers_run_one_way():
    result = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean():
    result = subprocess.run([str(BIN / "ruff"), "check", "rlpipe", "tests", "benchmarks", "dvc_stages"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

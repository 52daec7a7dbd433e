"""docs/hooks/zoo.py: the Results page's table from a small ``zoo.json``, its curves, and its refusals."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- zoo: results -->"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook_zoo", ROOT / "docs" / "hooks" / "zoo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def results_page(hook: ModuleType, markdown: str, project: Path, page: str = "results.md") -> str:
    page_ = SimpleNamespace(file=SimpleNamespace(src_uri=page))
    config = SimpleNamespace(config_file_path=str(project / "mkdocs.yml"))
    return hook.on_page_markdown(markdown, page_, config, None)


def task(name: str, env_id: str, **figures: object) -> dict:
    """A summary entry as benchmarks/zoo.py writes it (no reference unless given)."""
    return {"task": name, "config": f"configs/zoo/{name}.yaml", "env_id": env_id, "algorithm": "ppo",
            "seeds": [0, 1, 2], "n": 3, "budget_env_steps": 1_000_000, "env_steps_mean": 1_000_000.0,
            "eval_return_mean": 2000.0, "eval_return_std": 100.0, "eval_success_rate_mean": None,
            "train_return_mean": 1800.0, "wall_s_mean": 3600.0, "env_steps_per_s_mean": 277.7,
            "reference": None, "reference_budget": None, "reference_by": None,
            "reference_source": "none found", "ratio_to_reference": None,
            "curve_png": f"benchmarks/results/zoo/{name}.png", **figures}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with a zoo.json of two tasks and their curves."""
    summary = {
        "hopper": task("hopper", "Hopper-v5", reference=2410.435, reference_budget=1_000_000,
                       reference_by="rl-baselines3-zoo", ratio_to_reference=2000.0 / 2410.435,
                       reference_source="rl-baselines3-zoo benchmark.md, Hopper-v3"),
        "push_cube_grpo": task("push_cube_grpo", "PushCube", eval_return_mean=35.25, eval_return_std=1.5,
                               eval_success_rate_mean=0.875, env_steps_mean=640_000.0, wall_s_mean=95.0),
    }
    results = tmp_path / "benchmarks" / "results"
    (results / "zoo").mkdir(parents=True)
    (results / "zoo.json").write_text(json.dumps({
        "configs": "configs/zoo", "seeds": [0, 1, 2], "iterations": None, "overrides": [], "jobs": 2,
        "threads": 1, "rows": [], "summary": summary,
        "environment": {"torch": "2.13.0", "cpu_count": 16, "loadavg_1min_at_start": 1.0,
                        "loadavg_1min_at_end": 2.5}}))
    for name in summary:
        (results / "zoo" / f"{name}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return tmp_path


def test_the_marker_becomes_the_table_of_zoo_json(hook: ModuleType, project: Path):
    text = results_page(hook, f"# Results\n\n{MARKER}\n\nafter", project)
    assert MARKER not in text and text.startswith("# Results") and text.endswith("after")
    assert ("| `hopper` | `Hopper-v5` | ppo | 1,000,000 | 2,000.0 ± 100.0 | 3 | – | "
            "2,410.4 (rl-baselines3-zoo, 1,000,000 steps) | 0.83× | 1.0 h | 278 | "
            "[png](assets/zoo/hopper.png) |") in text
    assert ("| `push_cube_grpo` | `PushCube` | ppo | 1,000,000 (mean reached 640,000) | 35.2 ± 1.5 | 3 | "
            "0.88 | none found | – | 95 s | 278 | [png](assets/zoo/push_cube_grpo.png) |") in text
    assert "- `hopper` (Hopper-v5, ppo): rl-baselines3-zoo benchmark.md, Hopper-v3." in text
    assert "![push_cube_grpo: eval return against env steps](assets/zoo/push_cube_grpo.png)" in text
    assert "*Measured with torch 2.13.0, 16 CPUs, load average 1.0 → 2.5.*" in text
    assert "Source: `benchmarks/results/zoo.json`." in text
    assert results_page(hook, MARKER, project, page="performance.md") == MARKER  # other pages untouched


def test_a_missing_results_file_or_curve_fails_the_build_naming_it(hook: ModuleType, project: Path,
                                                                    tmp_path_factory: pytest.TempPathFactory):
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(PluginError, match=r"^benchmarks/results/zoo\.json: no such file \(docs/results\.md "
                                          r"shows its table; run python benchmarks/zoo\.py to write it\)$"):
        results_page(hook, MARKER, empty)
    (project / "benchmarks" / "results" / "zoo" / "hopper.png").unlink()
    with pytest.raises(PluginError, match=r"^benchmarks/results/zoo/hopper\.png: no such file"):
        results_page(hook, MARKER, project)


def test_a_zoo_json_without_finished_runs_says_so(hook: ModuleType, tmp_path: Path):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "zoo.json").write_text(json.dumps({"rows": [], "summary": {}}))
    assert "holds no finished run yet" in results_page(hook, MARKER, tmp_path)


def test_the_curves_are_published_under_assets_zoo(hook: ModuleType, project: Path):
    config = SimpleNamespace(config_file_path=str(project / "mkdocs.yml"), site_dir=str(project / "site"),
                             use_directory_urls=True, plugins=SimpleNamespace(_current_plugin="zoo"))
    files = hook.on_files(Files([]), config)
    published = {f.src_uri: Path(f.abs_src_path) for f in files}
    zoo = project / "benchmarks" / "results" / "zoo"
    assert published == {"assets/zoo/hopper.png": zoo / "hopper.png",
                         "assets/zoo/push_cube_grpo.png": zoo / "push_cube_grpo.png"}


def test_configs_without_a_row_are_named_as_not_measured_yet(hook: ModuleType, project: Path):
    zoo = project / "configs" / "zoo"
    zoo.mkdir(parents=True)
    for name in ("hopper", "push_cube_grpo", "mw_push", "dmc_cheetah_run"):
        (zoo / f"{name}.yaml").write_text("trainer: {}\n")
    text = results_page(hook, MARKER, project)
    assert ("Not measured yet (configs of `configs/zoo` with no finished run in the JSON): "
            "`dmc_cheetah_run`, `mw_push`.") in text
    for name in ("dmc_cheetah_run", "mw_push"):
        (zoo / f"{name}.yaml").unlink()
    assert "Not measured yet" not in results_page(hook, MARKER, project)

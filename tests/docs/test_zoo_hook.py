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
    return {
        "task": name,
        "config": f"configs/zoo/{name}.yaml",
        "env_id": env_id,
        "algorithm": "ppo",
        "seeds": [0, 1, 2],
        "n": 3,
        "budget_env_steps": 1_000_000,
        "env_steps_mean": 1_000_000.0,
        "eval_return_mean": 2000.0,
        "eval_return_std": 100.0,
        "eval_success_rate_mean": None,
        "train_return_mean": 1800.0,
        "wall_s_mean": 3600.0,
        "env_steps_per_s_mean": 277.7,
        "reference": None,
        "reference_budget": None,
        "reference_by": None,
        "reference_source": "none found",
        "ratio_to_reference": None,
        "curve_png": f"benchmarks/results/zoo/{name}.png",
        **figures,
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with a zoo.json of two tasks and their curves."""
    summary = {
        "hopper": task(
            "hopper",
            "Hopper-v5",
            reference=2410.435,
            reference_budget=1_000_000,
            reference_by="rl-baselines3-zoo",
            ratio_to_reference=2000.0 / 2410.435,
            reference_source="rl-baselines3-zoo benchmark.md, Hopper-v3",
            eval_return_ci={
                "iqm": [2525.4, 1135.2, 3480.8],
                "mean": [2525.4, 1135.2, 3480.8],
                "median": [2960.0, 1135.2, 3480.8],
            },
            ratio_ci={
                "iqm": [1.0477, 0.4710, 1.4441],
                "mean": [1.0477, 0.4710, 1.4441],
                "median": [1.228, 0.471, 1.444],
            },
            ratios=[0.471, 1.228, 1.444],
            seeds_at_least={"0.5": 2 / 3, "0.8": 2 / 3},
        ),
        "push_cube_grpo": task(
            "push_cube_grpo",
            "PushCube",
            eval_return_mean=35.25,
            eval_return_std=1.5,
            eval_success_rate_mean=0.875,
            env_steps_mean=640_000.0,
            stopped_early=2,
            wall_s_mean=95.0,
            eval_return_ci={
                "iqm": [35.25, 34.0, 36.5],
                "mean": [35.25, 34.0, 36.5],
                "median": [35.0, 34.0, 36.5],
            },
            ratio_ci=None,
            ratios=None,
            seeds_at_least=None,
        ),
    }
    results = tmp_path / "benchmarks" / "results"
    (results / "zoo").mkdir(parents=True)
    (results / "zoo.json").write_text(
        json.dumps(
            {
                "configs": "configs/zoo",
                "seeds": [0, 1, 2],
                "iterations": None,
                "overrides": [],
                "jobs": 2,
                "threads": 1,
                "rows": [],
                "summary": summary,
                "environment": {
                    "torch": "2.13.0",
                    "cpu_count": 16,
                    "loadavg_1min_at_start": 1.0,
                    "loadavg_1min_at_end": 2.5,
                },
            }
        )
    )
    for name in [*summary, "summary-ratios", "summary-profile"]:
        (results / "zoo" / f"{name}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return tmp_path


def test_the_marker_becomes_the_compact_table_then_the_charts_then_every_figure(
    hook: ModuleType, project: Path
):
    text = results_page(hook, f"# Results\n\n{MARKER}\n\nafter", project)
    assert MARKER not in text and text.startswith("# Results") and text.endswith("after")
    assert (
        "| task | reference (by, steps) | IQM [95 % CI] | ratio [95 % CI] | ≥ 0.5× · 0.8× | seeds | "
        "env steps |"
    ) in text
    assert (
        "| hopper | 2,410 (rl-zoo, 1.0M) | 2,525 [1,135, 3,481] | 1.05× [0.47, 1.44] | 2/3 · 2/3 | "
        "3 (0–2) | 1.0M |"
    ) in text
    assert (
        "| push_cube_grpo | none found | 35.2 [34.0, 36.5] | – | – | 3 (0–2) | "
        "1.0M (reached 640k; 2/3 met the stop rule) |" in text
    )
    assert (
        "| task (curve) | env, algorithm | eval return (mean ± std) | median | success | training time | "
        "env steps/s |"
    ) in text
    assert (
        "| [hopper](assets/zoo/hopper.png) | Hopper-v5, ppo | 2,000.0 ± 100.0 | 2,960.0 | – | 1.0 h | 278 |"
    ) in text
    assert (
        "| [push_cube_grpo](assets/zoo/push_cube_grpo.png) | PushCube, ppo | 35.2 ± 1.5 | 35.0 | 0.88 | "
        "95 s | 278 |"
    ) in text
    order = [
        "### At a glance",
        "| hopper | 2,410",
        "![Each task's final eval return over the reference",
        "assets/zoo/summary-profile.png",
        "### Every figure",
        "| [hopper]",
        "### Learning curves",
    ]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "- `hopper` (Hopper-v5, ppo): rl-baselines3-zoo benchmark.md, Hopper-v3." in text
    assert "![push_cube_grpo: eval return against env steps](assets/zoo/push_cube_grpo.png)" in text
    assert "*Measured with torch 2.13.0, 16 CPUs, load average 1.0 → 2.5.*" in text
    assert "Source: `benchmarks/results/zoo.json`." in text
    assert "predates the intervals" not in text
    assert results_page(hook, MARKER, project, page="performance.md") == MARKER  # other pages untouched


def test_a_zoo_json_from_before_the_intervals_still_renders_its_means(hook: ModuleType, project: Path):
    path = project / "benchmarks" / "results" / "zoo.json"
    data = json.loads(path.read_text())
    for figures in data["summary"].values():
        for key in ("eval_return_ci", "ratio_ci", "ratios", "seeds_at_least"):
            del figures[key]
    path.write_text(json.dumps(data))
    text = results_page(hook, MARKER, project)
    assert "| hopper | 2,410 (rl-zoo, 1.0M) | 2,000.0 (mean) | 0.83× (mean) | – | 3 (0–2) | 1.0M |" in text
    assert (
        "| [hopper](assets/zoo/hopper.png) | Hopper-v5, ppo | 2,000.0 ± 100.0 | – | – | 1.0 h | 278 |" in text
    )
    assert (
        "`benchmarks/results/zoo.json` predates the intervals: `python benchmarks/zoo.py --from-json` "
        "adds them."
    ) in text
    assert "summary-ratios.png" not in text  # no ratios to draw


def test_a_missing_chart_fails_the_build_naming_it(hook: ModuleType, project: Path):
    (project / "benchmarks" / "results" / "zoo" / "summary-profile.png").unlink()
    with pytest.raises(
        PluginError,
        match=r"^benchmarks/results/zoo/summary-profile\.png: no such file \(.*"
        r"python benchmarks/zoo\.py --from-json to draw it\)$",
    ):
        results_page(hook, MARKER, project)


def test_a_missing_results_file_or_curve_fails_the_build_naming_it(
    hook: ModuleType, project: Path, tmp_path_factory: pytest.TempPathFactory
):
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(
        PluginError,
        match=r"^benchmarks/results/zoo\.json: no such file \(docs/results\.md "
        r"shows its table; run python benchmarks/zoo\.py to write it\)$",
    ):
        results_page(hook, MARKER, empty)
    (project / "benchmarks" / "results" / "zoo" / "hopper.png").unlink()
    with pytest.raises(PluginError, match=r"^benchmarks/results/zoo/hopper\.png: no such file"):
        results_page(hook, MARKER, project)


def test_a_zoo_json_without_finished_runs_says_so(hook: ModuleType, tmp_path: Path):
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "zoo.json").write_text(json.dumps({"rows": [], "summary": {}}))
    assert "holds no finished run yet" in results_page(hook, MARKER, tmp_path)


def test_the_curves_are_published_under_assets_zoo(hook: ModuleType, project: Path):
    config = SimpleNamespace(
        config_file_path=str(project / "mkdocs.yml"),
        site_dir=str(project / "site"),
        use_directory_urls=True,
        plugins=SimpleNamespace(_current_plugin="zoo"),
    )
    files = hook.on_files(Files([]), config)
    published = {f.src_uri: Path(f.abs_src_path) for f in files}
    zoo = project / "benchmarks" / "results" / "zoo"
    assert published == {
        f"assets/zoo/{name}.png": zoo / f"{name}.png"
        for name in ("hopper", "push_cube_grpo", "summary-ratios", "summary-profile")
    }


def test_configs_without_a_row_are_named_as_not_measured_yet(hook: ModuleType, project: Path):
    zoo = project / "configs" / "zoo"
    zoo.mkdir(parents=True)
    for name in ("hopper", "push_cube_grpo", "mw_push", "dmc_cheetah_run"):
        (zoo / f"{name}.yaml").write_text("trainer: {}\n")
    text = results_page(hook, MARKER, project)
    assert (
        "Not measured yet (configs of `configs/zoo` with no finished run in the JSON): "
        "`dmc_cheetah_run`, `mw_push`."
    ) in text
    for name in ("dmc_cheetah_run", "mw_push"):
        (zoo / f"{name}.yaml").unlink()
    assert "Not measured yet" not in results_page(hook, MARKER, project)

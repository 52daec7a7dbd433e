"""The docs site: ``mkdocs build --strict`` passes, and its generated pages hold what they are built from.

The build runs once per test session (about 20 s): the Performance page must show figures read from
``benchmarks/results/*.json`` (checked here against the JSON files, formatted independently of the
hook), and the API reference must have a page per package of the new layout and none for the
modules being folded away. The hooks' failure modes are checked on the hook functions directly.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", str(out)]
    result = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return out


def page_text(site: Path, page: str) -> str:
    """The visible text of a built page (tags dropped, entities decoded, whitespace collapsed)."""
    body = (site / page / "index.html").read_text()
    body = body[body.index("<article") : body.index("</article>")]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def test_strict_build_passes_and_makes_every_nav_page(site: Path):
    for page in (
        "getting-started",
        "params",
        "envs",
        "algorithms",
        "python-api",
        "rollout-store",
        "offline",
        "faults",
        "tracking-dvc",
        "distributed",
        "performance",
        "results",
        "architecture",
        "reference",
    ):
        assert (site / page / "index.html").is_file(), page
    assert (site / "index.html").is_file()


def test_performance_tables_show_the_figures_of_benchmarks_results(site: Path):
    text = page_text(site, "performance")
    assert "<!-- results:" not in (site / "performance" / "index.html").read_text()
    for path in sorted(RESULTS.glob("*.json")):  # every results file is on the page
        assert path.name in text, f"{path.name} is not shown on the Performance page"
    w1 = json.loads((RESULTS / "sb3_compare_w1.json").read_text())
    for row in w1["rows"]:
        assert f"{row['vs_sb3']:.2f}×" in text and f"{row['median_sps']:,.0f}" in text, row["row"]
    cuda = json.loads((RESULTS / "cuda_throughput.json").read_text())
    assert f"{cuda['ratio_median']:.2f}×" in text
    assert all(f"{row['sps']:,.0f}" in text for row in cuda["rows"])
    cheetah = json.loads((RESULTS / "sb3_halfcheetah_1m.json").read_text())
    assert all(f"{run['eval_return_mean']:,.0f}" in text for run in cheetah)
    push = json.loads((RESULTS / "push_cube.json").read_text())
    assert f"{push['checkpoint_eval']['eval/success_at_end']:.3f}" in text
    assert (site / "assets" / "benchmarks" / "scaling.png").is_file()
    envpool = json.loads((RESULTS / "envpool_loop.json").read_text())
    for row in envpool["rows"]:  # its own table, the CPU breakdown beside it
        assert f"{row['ratio_cpu']:.2f}" in text and f"{row['rlpipe_sps_cpu']:,.0f}" in text, row["id"]
    assert "CPU ms per iteration, by phase" in text
    h200 = json.loads((RESULTS / "gpu_vs_rsl_rl_h200.json").read_text())
    assert all(f"{row['sps']:,.0f}" in text for row in h200["rows"])
    diag = json.loads((RESULTS / "store_diag_h200.json").read_text())
    assert all(f"{row['on_vs_off'][0]:.2f}–{row['on_vs_off'][1]:.2f}×" in text for row in diag["rows"])
    gil = json.loads((RESULTS / "gil_tax.json").read_text())
    assert all(f"{row['vs_none']:.2f}×" in text and f"{row['ops_per_s']:,.0f}" in text for row in gil["rows"])
    start = json.loads((RESULTS / "writer_start.json").read_text())
    assert all(f"{row['wall_s']:.2f}" in text for row in start["run"]["rows"] if "/" not in row["writer"])


def test_api_reference_documents_the_new_layout(site: Path):
    reference = site / "reference"
    pages = {p.name for p in reference.iterdir() if p.is_dir()}
    assert {"rlpipe.trainer", "rlpipe.algorithms", "rlpipe.envs", "rlpipe.config", "rlpipe.rollout"} <= pages
    assert not {"rlpipe.run", "rlpipe.learner"} & pages
    trainer = page_text(site, "reference/rlpipe.trainer")
    assert "Trainer" in trainer and "train" in trainer
    assert "PPOCfg" in page_text(site, "reference/rlpipe.config")


def test_readme_is_a_short_front_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "make run" in readme and "make test" in readme
    linked = set(re.findall(r"\(docs/([\w-]+\.md)", readme))
    assert linked and all((ROOT / "docs" / name).is_file() for name in linked)


# --- the hooks' refusals ------------------------------------------------------------------------------


def load_hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def performance_page(markdown: str, project: Path) -> str:
    hook = load_hook("performance")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="performance.md"))
    config = SimpleNamespace(config_file_path=str(project / "mkdocs.yml"))
    return hook.on_page_markdown(markdown, page, config, None)


def test_performance_hook_refuses_an_unknown_table_and_a_missing_results_file(tmp_path: Path):
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="no results table 'nope'; accepted: w1, "):
        performance_page("<!-- results: nope -->", ROOT)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    with pytest.raises(PluginError, match=r"benchmarks/results/cuda_scaling\.json: no such file"):
        performance_page("<!-- results: cuda_scaling -->", tmp_path)
    assert "Every results file is shown" in performance_page("<!-- results: others -->", tmp_path)


def test_performance_hook_shows_a_results_file_no_table_reads(tmp_path: Path):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "new_bench.json").write_text(json.dumps({"rows": [{"side": "rlpipe", "sps": 1234.5}]}))
    text = performance_page("<!-- results: others -->", tmp_path)
    assert "`new_bench.json`" in text and "| rlpipe | 1,234 |" in text
    assert "Source: `benchmarks/results/new_bench.json`" in text


def test_reference_hook_follows_the_source_tree(tmp_path: Path):
    hook = load_hook("reference")
    for name in ("trainer", "collector.py", "zoo", "run", "_private.py", "learner.py"):
        path = tmp_path / name
        if name.endswith(".py"):
            path.write_text('"""One line."""\n')
        else:
            path.mkdir()
            (path / "__init__.py").write_text(f'"""The {name} package."""\n')
    assert hook.documented(tmp_path) == ["trainer", "collector", "zoo"]
    assert hook.summary(tmp_path, "zoo") == "The zoo package."


def test_sphinx_roles_in_docstrings_read_as_inline_code(site: Path):
    from markdown import Markdown

    md = Markdown(extensions=[load_hook("reference").SphinxRoles()])
    assert md.convert("See :class:`Trainer` and :func:`~rlpipe.rollout.validate`.") == (
        "<p>See <code>Trainer</code> and <code>validate</code>.</p>"
    )
    assert ":class:`" not in (site / "reference" / "rlpipe.trainer" / "index.html").read_text()


def test_the_datasets_page_shows_what_an_export_costs(site: Path):
    text = page_text(site, "datasets")
    assert "<!-- results:" not in (site / "datasets" / "index.html").read_text()
    for row in json.loads((RESULTS / "dataset_export.json").read_text())["rows"]:
        assert f"{row['dataset']} {row['format']}" in text and f"{row['mb_per_1m']:,.0f}" in text, row


def test_the_off_policy_page_shows_every_run_of_its_results_file():
    hook = load_hook("performance")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="off-policy.md"))
    config = SimpleNamespace(config_file_path=str(ROOT / "mkdocs.yml"))
    text = hook.on_page_markdown("<!-- results: offpolicy_mujoco -->", page, config, None)
    data = json.loads((RESULTS / "offpolicy_mujoco.json").read_text())
    for run in data["runs"]:
        cells = [run["algo"], run["env"], run["seed"], f"{run['steps']:,}", f"{run['eval_return']:,.0f}"]
        row = "| " + " | ".join(str(c) for c in cells) + " |"
        assert row in text, row
    for name, entry in data["summary"].items():
        assert f"| `{name}` | {entry['steps']:,} |" in text and f"{entry['iqm_over_zoo']:.2f}×" in text
    assert "Source: `benchmarks/results/offpolicy_mujoco.json`" in text

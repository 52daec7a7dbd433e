"""mkdocs hook: the Results page's tables, generated from ``benchmarks/results/zoo.json`` at build time.

``docs/results.md`` holds the prose and the marker ``<!-- zoo: results -->``; this hook replaces it with
what ``benchmarks/zoo.py`` wrote, read at a glance first: a compact table per task (the published
reference and who published it, rlpipe's interquartile mean over seeds with its 95 % bootstrap
interval, the ratio to the reference with its interval, how many seeds reach 0.5× and 0.8× of it, the
seeds, the env steps), the chart of those ratios and the performance profile; then every figure (env
id, algorithm, mean ± std and median of the final deterministic eval return, the success rate where
the env reports one, the training time and env steps per second on the machine the JSON records),
the references' sources and each task's learning curve. The figures
(``benchmarks/results/zoo/*.png``) are published as ``assets/zoo/<name>.png``. A missing ``zoo.json``,
or a figure missing for it, fails the build with one line naming the file. A ``zoo.json`` written
before the intervals existed still renders (its means instead), and names the command that adds them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

PAGE = "results.md"
MARKER = "<!-- zoo: results -->"
RESULTS = "benchmarks/results/zoo.json"
CURVES = "benchmarks/results/zoo"
ASSETS = "assets/zoo"
CHARTS = {
    "summary-ratios.png": "Each task's final eval return over the reference: the IQM over seeds with its "
    "95 % interval (squares and bars), each seed (circles)",
    "summary-profile.png": "Performance profile over the tasks with a reference: the share of runs whose "
    "ratio exceeds τ, each task weighing the same, with its 95 % band",
}
"""The charts over all tasks that ``benchmarks/zoo.py`` draws beside the curves, with their captions."""


def project_root(config: MkDocsConfig) -> Path:
    """The folder of ``mkdocs.yml``: the repository root."""
    return Path(config.config_file_path).parent


def num(value: float | None, digits: int = 0) -> str:
    """``12,345`` / ``1.61`` (``–`` for a figure not measured)."""
    return "–" if value is None else f"{value:,.{digits}f}"


def duration(seconds: float | None) -> str:
    """``42 s`` below two minutes, ``12.5 min`` below an hour, else ``3.2 h``."""
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def machine(env: dict[str, Any] | None) -> str:
    """One line naming the machine the JSON records."""
    if not env:
        return ""
    return (
        f"*Measured with torch {env.get('torch', '?')}, {env.get('cpu_count', '?')} CPUs, load average "
        f"{env.get('loadavg_1min_at_start', '?')} → {env.get('loadavg_1min_at_end', '?')}.*"
    )


def not_measured(data: dict[str, Any], root: Path, measured: set[str]) -> list[str]:
    """One line naming the configs of the JSON's ``configs`` folder that have no row yet (or nothing)."""
    if not data.get("configs"):
        return []
    missing = sorted(p.stem for p in (root / data["configs"]).glob("*.yaml") if p.stem not in measured)
    if not missing:
        return []
    return [
        f"Not measured yet (configs of `{data['configs']}` with no finished run in the JSON): "
        + ", ".join(f"`{name}`" for name in missing)
        + "."
    ]


def interval(estimate: list[float] | None, digits: int, unit: str = "") -> str:
    """``2,525 [1,135, 3,481]`` from ``[point, lower, upper]`` (``–`` when not measured)."""
    if not estimate:
        return "–"
    point, low, high = estimate
    return f"{num(point, digits)}{unit} [{num(low, digits)}, {num(high, digits)}]"


def glance_cells(t: dict[str, Any]) -> list[str]:
    """IQM [CI], ratio IQM [CI] and the seeds at 0.5× / 0.8× of one task (means for an older JSON)."""
    if "eval_return_ci" not in t:
        ratio = t["ratio_to_reference"]
        return [
            f"{num(t['eval_return_mean'], 1)} (mean)",
            "–" if ratio is None else f"{ratio:.2f}× (mean)",
            "–",
        ]
    shares = t.get("seeds_at_least")
    seeds = "–" if not shares else " · ".join(f"{round(shares[k] * t['n'])}/{t['n']}" for k in ("0.5", "0.8"))
    iqm = t["eval_return_ci"] and t["eval_return_ci"]["iqm"]
    return [
        interval(iqm, 0 if iqm and abs(iqm[0]) >= 100 else 1),
        interval(t["ratio_ci"] and t["ratio_ci"]["iqm"], 2, "×"),
        seeds,
    ]


def short_steps(steps: float | None) -> str:
    """``1.0M`` / ``301k`` / ``512`` env steps."""
    if steps is None:
        return "–"
    if steps >= 1e6:
        return f"{steps / 1e6:.1f}M"
    return f"{steps / 1e3:.0f}k" if steps >= 1e3 else f"{steps:.0f}"


SHORT_NAMES = {"rl-baselines3-zoo": "rl-zoo"}
"""Publishers named shorter in the compact table (the references' list under it names them in full)."""


def short_reference(t: dict[str, Any]) -> str:
    """``2,410 (rl-zoo, 1.0M)``, or ``none found``."""
    if t["reference"] is None:
        return "none found"
    by = SHORT_NAMES.get(t["reference_by"], t["reference_by"])
    return f"{num(t['reference'])} ({by}, {short_steps(t['reference_budget'])})"


def seeds(t: dict[str, Any]) -> str:
    """``3 (0–2)``, ``10 (0–9)``, or ``3 (0, 4, 7)`` for seeds that are not a run of integers."""
    ids = t.get("seeds", [])
    run = ids == list(range(ids[0], ids[0] + len(ids))) if ids else False
    named = f"{ids[0]}–{ids[-1]}" if run and len(ids) > 1 else ", ".join(map(str, ids))
    return f"{t['n']} ({named})" if ids else str(t["n"])


def steps_reached(t: dict[str, Any]) -> str:
    """The planned env steps; if runs stopped early, the mean reached and the seeds a stop rule ended."""
    planned, reached = t["budget_env_steps"], t["env_steps_mean"]
    if reached is None or reached >= planned:
        return short_steps(planned)
    ruled = t.get("stopped_early")
    by_rule = f"; {ruled}/{t['n']} met the stop rule" if ruled is not None else ""
    return f"{short_steps(planned)} (reached {short_steps(reached)}{by_rule})"


def glance(summary: list[dict[str, Any]]) -> str:
    """The compact table: the comparison a trainer is chosen by, one row per task."""
    header = [
        "task",
        "reference (by, steps)",
        "IQM [95 % CI]",
        "ratio [95 % CI]",
        "≥ 0.5× · 0.8×",
        "seeds",
        "env steps",
    ]
    return table(
        header,
        [[t["task"], short_reference(t), *glance_cells(t), seeds(t), steps_reached(t)] for t in summary],
    )


def every_figure(summary: list[dict[str, Any]]) -> str:
    """The full table: env, algorithm, mean ± std and median, success, times; each task links its curve."""
    header = [
        "task (curve)",
        "env, algorithm",
        "eval return (mean ± std)",
        "median",
        "success",
        "training time",
        "env steps/s",
    ]
    rows = []
    for t in summary:
        median = (t.get("eval_return_ci") or {}).get("median")
        rows.append(
            [
                f"[{t['task']}]({ASSETS}/{t['task']}.png)",
                f"{t['env_id']}, {t['algorithm']}",
                f"{num(t['eval_return_mean'], 1)} ± {num(t['eval_return_std'], 1)}",
                num(median[0], 1) if median else "–",
                num(t["eval_success_rate_mean"], 2),
                duration(t["wall_s_mean"]),
                num(t["env_steps_per_s_mean"]),
            ]
        )
    return table(header, rows)


def charts(root: Path, summary: list[dict[str, Any]]) -> list[str]:
    """The ratio chart and the profile where a task has ratios (their PNGs must exist then)."""
    if not any(t.get("ratios") for t in summary):
        return []
    for name in CHARTS:
        if not (root / CURVES / name).is_file():
            raise PluginError(
                f"{CURVES}/{name}: no such file ({RESULTS} has ratios to draw; run "
                "python benchmarks/zoo.py --from-json to draw it)"
            )
    return [f"![{caption}]({ASSETS}/{name})\n\n*{caption}.*" for name, caption in CHARTS.items()]


def render(data: dict[str, Any], root: Path) -> str:
    """The Markdown that replaces the marker: the tables, the charts, the references, the curves."""
    summary = list(data.get("summary", {}).values())
    if not summary:
        return f"`{RESULTS}` holds no finished run yet: run `python benchmarks/zoo.py`."
    for name in (t["task"] for t in summary):
        if not (root / CURVES / f"{name}.png").is_file():
            raise PluginError(
                f"{CURVES}/{name}.png: no such file ({RESULTS} has task {name!r}; "
                f"re-run benchmarks/zoo.py --tasks {name} to draw it)"
            )
    older = (
        [f"`{RESULTS}` predates the intervals: `python benchmarks/zoo.py --from-json` adds them."]
        if any("eval_return_ci" not in t for t in summary)
        else []
    )
    sources = [
        f"- `{t['task']}` ({t['env_id']}, {t['algorithm']}): {t['reference_source']}." for t in summary
    ]
    curves = [f"![{t['task']}: eval return against env steps]({ASSETS}/{t['task']}.png)" for t in summary]
    overrides = ", ".join(f"`{o}`" for o in data.get("overrides", [])) or "none"
    return "\n\n".join(
        [
            "### At a glance",
            glance(summary),
            *older,
            *not_measured(data, root, {t["task"] for t in summary}),
            *charts(root, summary),
            "### Every figure",
            every_figure(summary),
            f"Configs: `{data.get('configs')}`; seeds {', '.join(map(str, data.get('seeds', [])))}; "
            f"`--iterations` {data.get('iterations') or 'as configured'}; `--set` {overrides}; "
            f"{data.get('jobs', 1)} run(s) at a time, {data.get('threads', 1)} torch thread(s) each.",
            machine(data.get("environment")),
            "References:\n\n" + "\n".join(sources),
            f"Source: `{RESULTS}`.",
            "### Learning curves",
            "\n\n".join(curves),
        ]
    )


# --- mkdocs events ----------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the Results page's marker with the table built from ``benchmarks/results/zoo.json``."""
    if page.file.src_uri != PAGE or MARKER not in markdown:
        return markdown
    root = project_root(config)
    path = root / RESULTS
    if not path.is_file():
        raise PluginError(
            f"{RESULTS}: no such file (docs/{PAGE} shows its table; run python benchmarks/zoo.py to write it)"
        )
    return markdown.replace(MARKER, render(json.loads(path.read_text()), root))


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Publish the zoo's curves (``benchmarks/results/zoo/*.png``) as ``assets/zoo/<task>.png``."""
    for png in sorted((project_root(config) / CURVES).glob("*.png")):
        files.append(File.generated(config, f"{ASSETS}/{png.name}", abs_src_path=str(png)))
    return files

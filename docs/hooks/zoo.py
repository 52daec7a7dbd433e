"""mkdocs hook: the Results page's table, generated from ``benchmarks/results/zoo.json`` at build time.

``docs/results.md`` holds the prose and the marker ``<!-- zoo: results -->``; this hook replaces it with
the per-task summary ``benchmarks/zoo.py`` wrote: task, env id, algorithm, budget, the final deterministic
eval return (mean ± std over seeds), the success rate where the env reports one, the published
reference with its source and the ratio to it, the training time and env steps per second on the
machine the JSON records, and each task's learning curve. The curves
(``benchmarks/results/zoo/<task>.png``) are published as ``assets/zoo/<task>.png``. A missing
``zoo.json``, or a curve missing for a task of it, fails the build with one line naming the file.
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


def reference(task: dict[str, Any]) -> str:
    """``2,410 (rl-baselines3-zoo, 1,000,000 steps)``, or ``none found`` (the list under it says why)."""
    if task["reference"] is None:
        return "none found"
    return f"{num(task['reference'], 1)} ({task['reference_by']}, {num(task['reference_budget'])} steps)"


def budget(task: dict[str, Any]) -> str:
    """The planned env steps, and the mean reached when runs stopped early."""
    planned, reached = task["budget_env_steps"], task["env_steps_mean"]
    stopped = reached is not None and reached < planned
    return num(planned) + (f" (mean reached {num(reached)})" if stopped else "")


def machine(env: dict[str, Any] | None) -> str:
    """One line naming the machine the JSON records."""
    if not env:
        return ""
    return (f"*Measured with torch {env.get('torch', '?')}, {env.get('cpu_count', '?')} CPUs, load average "
            f"{env.get('loadavg_1min_at_start', '?')} → {env.get('loadavg_1min_at_end', '?')}.*")


def not_measured(data: dict[str, Any], root: Path, measured: set[str]) -> list[str]:
    """One line naming the configs of the JSON's ``configs`` folder that have no row yet (or nothing)."""
    if not data.get("configs"):
        return []
    missing = sorted(p.stem for p in (root / data["configs"]).glob("*.yaml") if p.stem not in measured)
    if not missing:
        return []
    return [f"Not measured yet (configs of `{data['configs']}` with no finished run in the JSON): "
            + ", ".join(f"`{name}`" for name in missing) + "."]


def render(data: dict[str, Any], root: Path) -> str:
    """The Markdown that replaces the marker: the table, the references, the machine and the curves."""
    summary = list(data.get("summary", {}).values())
    if not summary:
        return f"`{RESULTS}` holds no finished run yet: run `python benchmarks/zoo.py`."
    for name in (t["task"] for t in summary):
        if not (root / CURVES / f"{name}.png").is_file():
            raise PluginError(f"{CURVES}/{name}.png: no such file ({RESULTS} has task {name!r}; "
                              f"re-run benchmarks/zoo.py --tasks {name} to draw it)")
    header = ["task", "env", "algorithm", "budget (env steps)", "eval return (mean ± std)", "seeds",
              "eval success", "reference", "ratio", "training time (mean)", "env steps/s", "curve"]
    rows = [[f"`{t['task']}`", f"`{t['env_id']}`", t["algorithm"], budget(t),
             f"{num(t['eval_return_mean'], 1)} ± {num(t['eval_return_std'], 1)}", str(t["n"]),
             num(t["eval_success_rate_mean"], 2), reference(t),
             "–" if t["ratio_to_reference"] is None else f"{t['ratio_to_reference']:.2f}×",
             duration(t["wall_s_mean"]), num(t["env_steps_per_s_mean"]),
             f"[png]({ASSETS}/{t['task']}.png)"] for t in summary]
    sources = [f"- `{t['task']}` ({t['env_id']}, {t['algorithm']}): {t['reference_source']}."
               for t in summary]
    curves = [f"![{t['task']}: eval return against env steps]({ASSETS}/{t['task']}.png)" for t in summary]
    overrides = ", ".join(f"`{o}`" for o in data.get("overrides", [])) or "none"
    return "\n\n".join([
        table(header, rows), *not_measured(data, root, {t["task"] for t in summary}),
        f"Configs: `{data.get('configs')}`; seeds {', '.join(map(str, data.get('seeds', [])))}; "
        f"`--iterations` {data.get('iterations') or 'as configured'}; `--set` {overrides}; "
        f"{data.get('jobs', 1)} run(s) at a time, {data.get('threads', 1)} torch thread(s) each.",
        machine(data.get("environment")), "References:\n\n" + "\n".join(sources),
        f"Source: `{RESULTS}`.", "### Learning curves", "\n\n".join(curves)])


# --- mkdocs events ----------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the Results page's marker with the table built from ``benchmarks/results/zoo.json``."""
    if page.file.src_uri != PAGE or MARKER not in markdown:
        return markdown
    root = project_root(config)
    path = root / RESULTS
    if not path.is_file():
        raise PluginError(f"{RESULTS}: no such file (docs/{PAGE} shows its table; run "
                          "python benchmarks/zoo.py to write it)")
    return markdown.replace(MARKER, render(json.loads(path.read_text()), root))


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Publish the zoo's curves (``benchmarks/results/zoo/*.png``) as ``assets/zoo/<task>.png``."""
    for png in sorted((project_root(config) / CURVES).glob("*.png")):
        files.append(File.generated(config, f"{ASSETS}/{png.name}", abs_src_path=str(png)))
    return files

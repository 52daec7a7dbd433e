"""Terminal views of ``rlpipe inspect``: a run summary and one rollout's table."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["render_rollout", "render_run"]


def render_rollout(info: dict[str, Any]) -> None:
    """Print one rollout's keys, layout and statistics as a table, then its attributes and episodes."""
    table = Table(title=f"{info['path']}  [N={info['num_envs']}, T+1={info['horizon'] + 1}]")
    for column in ("key", "shape", "dtype", "chunks", "codec", "bytes"):
        table.add_column(column, justify="right" if column == "bytes" else "left", no_wrap=True)
    table.add_column("stats", ratio=1)
    for key, meta in info["keys"].items():
        table.add_row(
            key,
            str(meta["shape"]),
            meta["dtype"],
            str(meta["chunks"]),
            meta["codec"],
            f"{meta['bytes_on_disk']:,}",
            _format_stats(meta["stats"]),
        )
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    console.print(table)
    console.print(
        f"schema version {info['schema_version']}, {info['transitions']:,} transitions, "
        f"{info['bytes_on_disk']:,} bytes on disk"
    )
    for title, values in (("attrs", info["attrs"]), ("episodes", info["episodes"])):
        console.print(f"{title}: " + ", ".join(f"{k}={_short(v)}" for k, v in values.items()))


def render_run(s: dict[str, Any]) -> str:
    """The run summary of :func:`rlpipe.offline.run_summary.describe_run` as text lines."""
    ro, ck = s["rollouts"], s["checkpoints"]
    stored = f"rollouts: {ro['count']} stored"
    if ro["count"]:
        shards = f", {ro['world_size']} shards each" if ro["sharded"] else ""
        stored += f" (iterations {ro['first']}…{ro['last']}, {ro['bytes_on_disk']:,} bytes{shards})"
    lines = [
        f"run {s['run_dir']}  ({s['exp_name']}: {s['algorithm']} on {s['env_id']})",
        f"iterations {s['iterations']}, env steps {s['env_steps']:,}",
        f"params hash {s['params_hash']}, training hash {s['training_hash']}",
        stored,
        f"checkpoints: {ck['count']} (latest {ck['latest']})",
    ]
    lines += [
        f"needs module {ref.partition(':')[0]} ({what} {ref}): installed, or its folder on PYTHONPATH"
        for what, ref in s.get("code", {}).items()
    ]
    shown = {k: v for k, v in s["metrics"].items() if k.startswith(("eval/", "train/episode_return"))}
    if shown:
        lines.append("metrics: " + ", ".join(f"{k}={_short(v)}" for k, v in sorted(shown.items())))
    return "\n".join(lines)


def _format_stats(stats: dict[str, Any]) -> str:
    if "true" in stats:
        return f"true {stats['true']:,} / false {stats['false']:,}"
    if "mean" in stats:
        bad = f", {stats['nonfinite']} non-finite" if stats["nonfinite"] else ""
        return f"{stats['min']:.4g} … {stats['max']:.4g}, mean {stats['mean']:.4g} ± {stats['std']:.4g}{bad}"
    if "counts" in stats:
        return "counts " + ", ".join(f"{k}: {v:,}" for k, v in stats["counts"].items())
    return ", ".join(f"{k} {_short(v)}" for k, v in stats.items())


def _short(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)

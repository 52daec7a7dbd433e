"""mkdocs hook: the Performance page's tables, generated from ``benchmarks/results/*.json`` at build time.

``docs/performance.md`` holds the prose and a marker per table, ``<!-- results: NAME -->``; this hook
replaces each marker with a Markdown table built from the JSON files the benchmark scripts wrote
(:data:`TABLES`), followed by the machine each was measured on. No figure on that page is typed by
hand: re-running a script with ``--json benchmarks/results/…`` changes the page. A results file no
table reads is still shown (``<!-- results: others -->``), a marker naming no table or a missing file
fails the build, and the benchmark figures (``benchmarks/**/*.png``) are published under
``assets/benchmarks/``.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

PAGE = "performance.md"
PAGES = (PAGE, "datasets.md", "off-policy.md")
"""Pages whose markers this hook fills (the Datasets page shows what an export costs, the Off-policy
page its MuJoCo runs)."""
MARKER = re.compile(r"<!-- results: (\w+) -->")


def project_root(config: MkDocsConfig) -> Path:
    """The folder of ``mkdocs.yml``: the repository root."""
    return Path(config.config_file_path).parent


class Results:
    """The JSON files of ``benchmarks/results``; remembers which ones a table has read."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.read = folder, set()

    def load(self, name: str) -> Any:
        """The parsed ``benchmarks/results/<name>``; a missing file fails the build naming it."""
        path = self.folder / name
        if not path.is_file():
            raise PluginError(f"benchmarks/results/{name}: no such file (docs/{PAGE} shows a table of it; "
                              "re-run its benchmark with --json, or drop the table)")
        self.read.add(name)
        return json.loads(path.read_text())

    def names(self, pattern: str) -> list[str]:
        """The results file names matching a glob ``pattern``, sorted."""
        return sorted(p.name for p in self.folder.glob(pattern))


# --- formatting -------------------------------------------------------------------------------------


def num(value: float, digits: int = 0) -> str:
    """``12,345`` / ``1.61``: thousands separators, ``digits`` decimals."""
    return f"{value:,.{digits}f}"


def ratio(value: float) -> str:
    """``1.61×``."""
    return f"{value:.2f}×"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine(env: dict[str, Any] | None, load: list[float] | None = None) -> str:
    """One line naming the machine of a results file (what its ``environment`` block records)."""
    if not env and not load:
        return ""
    parts = []
    if env:
        parts += [f"torch {env.get('torch', '?')}", f"{env.get('cpu_count', '?')} CPUs",
                  f"{env.get('torch_threads', '?')} torch thread(s)"]
        if "loadavg_1min_at_start" in env:
            start, end = env["loadavg_1min_at_start"], env.get("loadavg_1min_at_end", "?")
            parts.append(f"load average {start} → {end}")
    elif load:
        parts.append("load average " + " / ".join(f"{x:.1f}" for x in load))
    return "*Measured with " + ", ".join(parts) + ".*"


def source(*names: str) -> str:
    """The line under a table naming the results files it was built from."""
    return "Source: " + ", ".join(f"`benchmarks/results/{n}`" for n in names) + "."


# --- the tables -------------------------------------------------------------------------------------


def w1(results: Results) -> str:
    """W1 against SB3 (``peers/sb3_compare.py``): one table per results file."""
    blocks = []
    for name in results.names("sb3_compare*.json"):
        data = results.load(name)
        rows = [[r["row"], num(r["median_sps"]), f"{num(r['min_sps'])}–{num(r['max_sps'])}",
                 ratio(r["vs_sb3"]), num(r["median_cpu_s"], 1), ratio(r["cpu_vs_sb3"])] for r in data["rows"]]
        header = ["row", "env steps/s (median)", "min–max", "vs SB3", "CPU s", "per CPU s vs SB3"]
        blocks.append(f"**`{name}`** — {data['rounds']} interleaved rounds of {num(data['total_steps'])} env "
                      f"steps per row (target: store and MLflow on ≥ {ratio(data['target_vs_sb3'])} SB3)\n\n"
                      + table(header, rows) + "\n\n" + machine(data.get("environment")))
    return "\n\n".join(blocks)


def halfcheetah(results: Results) -> str:
    """HalfCheetah-v5 against SB3 (``peers/sb3_halfcheetah.py``): every run, and rlpipe's speed-up."""
    names = sorted(results.names("sb3_halfcheetah_*.json"), key=lambda n: -max(
        r["steps"] for r in json.loads((results.folder / n).read_text())))
    blocks = []
    for name in names:
        runs = results.load(name)
        rows = [[r["side"], r["env"], r.get("seed", "–"), num(r["steps"]), num(r["wall_s"]),
                 num(r["cpu_s"]) if "cpu_s" in r else "–", num(r["steps_per_s"]),
                 f"{num(r['eval_return_mean'])} ± {num(r['eval_return_std'])}",
                 " / ".join(f"{x:.1f}" for x in r["load_avg"])] for r in runs]
        sb3 = next((r for r in runs if r["side"] == "sb3"), None)
        setups = dict.fromkeys(r["env"] for r in runs if r["side"] == "rlpipe")
        summary = "".join(speedup(sb3, [r for r in runs if r["env"] == env]) for env in setups if sb3)
        blocks.append(f"**`{name}`**\n\n" + summary + "\n" + table(
            ["side", "env", "seed", "env steps", "wall s", "CPU s", "env steps/s", "eval return (det.)",
             "load average"], rows))
    return "\n\n".join(blocks)


def speedup(sb3: dict[str, Any], ours: list[dict[str, Any]]) -> str:
    """One line: how much faster one rlpipe set-up trained than SB3 (medians over its seeds)."""
    wall = statistics.median(r["wall_s"] for r in ours)
    line = f"- {ours[0]['env']}, {len(ours)} seed(s): {ratio(sb3['wall_s'] / wall)} SB3's speed in wall time"
    if "cpu_s" in sb3 and all("cpu_s" in r for r in ours):
        line += f", {ratio(sb3['cpu_s'] / statistics.median(r['cpu_s'] for r in ours))} per CPU second"
    returns = " / ".join(num(r["eval_return_mean"]) for r in ours)
    return line + f"; eval return {returns} against SB3's {num(sb3['eval_return_mean'])}\n"


def cuda_throughput(results: Results) -> str:
    """The massive batch on CUDA against the plain loop (``peers/throughput.py --device cuda``)."""
    rows, env, store = [], None, []
    for name in results.names("cuda_throughput*.json"):
        data = results.load(name)
        sides = {r["side"]: r for r in data["rows"]}
        env = env or data.get("environment")
        if data["benchmark"] == "throughput-store":
            on, off = sides["store on"], sides["store off"]
            store.append([f"`{name}`", num(int(data["args"]["num_envs"])), num(on["median_s"], 3),
                          num(off["median_s"], 3), ratio(data["ratio_median"]), ratio(data["target"])])
            continue
        ours, plain = sides["rlpipe"], sides["plain"]
        rows.append([f"`{name}`", num(int(data["args"]["num_envs"])), data["args"]["batch_size"],
                     f"{num(ours['median_s'], 3)} ({num(ours['collect_s'], 3)} + {num(ours['update_s'], 3)})",
                     num(ours["sps"]), num(plain["median_s"], 3), num(plain["sps"]),
                     ratio(data["ratio_median"]), ratio(ours["median_s"] / plain["median_s"])])
    out = table(["file", "envs", "minibatch", "rlpipe s/iteration (collect + update)", "rlpipe env steps/s",
                 "plain s/iteration", "plain env steps/s", "rlpipe / plain (paired median)",
                 "ratio of medians"], rows)
    if store:
        out += "\n\nThe rollout store on CUDA, store on against off:\n\n" + table(
            ["file", "envs", "store on s/iteration", "store off s/iteration", "on / off", "target"], store)
    return out + "\n\n" + machine(env)


def cuda_scaling(results: Results) -> str:
    """Env steps per second of wall time against N on CUDA (``peers/scaling.py --device cuda``)."""
    data = results.load("cuda_scaling.json")
    sides = list(dict.fromkeys(r["side"] for r in data["rows"]))
    by = {(r["n"], r["side"]): r for r in data["rows"]}
    sizes = sorted({r["n"] for r in data["rows"]})
    rows = [[num(n), num(by[n, sides[0]]["minibatch"])] + [num(by[n, s]["sps"]) if (n, s) in by else "–"
                                                           for s in sides] for n in sizes]
    return (table(["envs", "minibatch"] + [f"{s} env steps/s" for s in sides], rows) + "\n\n"
            + machine(data.get("environment")))


def cuda_sync(results: Results) -> str:
    """Host–device synchronisations per iteration on CUDA, rlpipe against the plain loop."""
    data = results.load("cuda_sync.json")
    rows = []
    for key in sorted((k for k in data if re.fullmatch(r"N\d+", k)), key=lambda k: int(k[1:])):
        part = data[key]
        calls = part["rlpipe_collect_profile"]["runtime_calls"]
        rows.append([num(int(key[1:])), part["rlpipe_iteration"]["total"], part["plain_iteration"]["total"],
                     num(calls.get("cudaLaunchKernel", 0) + calls.get("cudaLaunchKernelExC", 0))])
    return table(["envs", "rlpipe syncs per iteration", "plain loop syncs per iteration",
                  "kernel launches in rlpipe's collect (32 steps)"], rows)


def cartpole_step(results: Results) -> str:
    """µs per env step of CartPole-v1 per simulator and adapter (``speed/cartpole_step.py``)."""
    data = results.load("cartpole_step.json")
    sides = list(dict.fromkeys(r["side"] for r in data["rows"]))
    envs = sorted({r["envs"] for r in data["rows"]})
    by = {(r["envs"], r["side"]): r for r in data["rows"]}
    rows = [[s] + [f"{num(by[n, s]['us_per_step'], 0)} µs ({ratio(by[n, s]['vs_rlpipe_vector'])})"
                   for n in envs] for s in sides]
    return (table(["side"] + [f"{n} envs: µs per step (vs rlpipe vector)" for n in envs], rows) + "\n\n"
            + machine(data.get("environment")))


def push_cube(results: Results) -> str:
    """The PushCube run, its evaluations and the exported ONNX policy (``learning/push_cube_learning.py``)."""
    data = results.load("push_cube.json")
    metric, hit = data["metric"], data["first_hit"]
    rows = [[f"`{metric}` ≥ {data['target']} first", f"iteration {num(hit['iteration'])}, "
             f"{num(hit['env_steps'])} env steps, {num(hit['wall_s'])} s of training"],
            ["stopped", f"iteration {num(data['final_iteration'])}, {num(data['env_steps'])} env steps, "
             f"{num(data['train_wall_s'])} s of training: {data['summary']['stopped_by']}"]]
    evals = (("online eval", "online_eval"), ("`rlpipe eval` of the final checkpoint", "checkpoint_eval"),
             ("`rlpipe eval --policy policy.onnx`", "onnx_eval"))
    for label, key in evals:
        ev = data[key]
        rows.append([label, f"{num(ev['eval/episodes'])} episodes: success at the end "
                     f"{num(ev['eval/success_at_end'], 3)}, at any step {num(ev['eval/success_rate'], 3)}, "
                     f"return {num(ev['eval/return_mean'], 1)} ± {num(ev['eval/return_std'], 1)}"])
    return table(["what", "figure"], rows) + "\n\n" + machine(None, data.get("load_avg_now"))


def pixel_cartpole(results: Results) -> str:
    """CartPole from pixels to a deterministic eval of 475, per seed (``learning/pixel_cartpole.py``)."""
    data = results.load("pixel_cartpole.json")
    rows = [[str(r["seed"]), "yes" if r["solved"] else "no", num(r["env_steps"]), num(r["train_min"], 1),
             num(r["cpu_min"], 1), num(r["recheck_return"], 1)] for r in data["seeds"]]
    return table(["seed", "solved", "env steps", "training min (wall)", "CPU min", "64-episode eval"], rows) \
        + "\n\n" + machine(data.get("environment"))


def dataset_export(results: Results) -> str:
    """``rlpipe dataset``: episodes, frames, MB, seconds, both per 1M transitions (``dataset_export.py``)."""
    data = results.load("dataset_export.json")
    rows = [[f"`{r['dataset']}`", r["format"], num(r["episodes"]), num(r["frames"]), num(r["mb"], 2),
             num(r["seconds"], 2), num(r["mb_per_1m"]), num(r["seconds_per_1m"])] for r in data["rows"]]
    return table(["run → dataset", "format", "episodes", "frames", "MB", "export s", "MB per 1M",
                  "s per 1M"], rows) + "\n\n" + machine(data.get("environment"))


def envpool_loop(results: Results) -> str:
    """The full loop (store, MLflow on) beside a plain PPO loop on envpool (``peers/envpool_loop.py``)."""
    data = results.load("envpool_loop.json")
    rows = [[f"`{r['id']}`", num(r["num_envs"]), num(r["plain_sps_wall"]), num(r["rlpipe_sps_wall"]),
             num(r["ratio_wall"], 2), num(r["plain_sps_cpu"]), num(r["rlpipe_sps_cpu"]),
             num(r["ratio_cpu"], 2)]
            for r in data["rows"]]
    return table(["env", "envs", "plain loop steps/s", "rlpipe steps/s", "ratio", "plain steps/CPU s",
                  "rlpipe steps/CPU s", "CPU ratio"], rows) + "\n\n" + breakdown(data["rows"]) \
        + "\n\n" + machine(data.get("environment"))


def breakdown(rows: list[dict[str, Any]]) -> str:
    """Where each side's CPU time goes: ms per iteration and phase, one column per env and side."""
    columns = [(r["id"], side) for r in rows for side in ("plain", "rlpipe")]
    phases = list(dict.fromkeys(b["phase"] for r in rows for b in r["breakdown"]))
    cpu = {(r["id"], b["side"], b["phase"]): b["cpu_ms"] for r in rows for b in r["breakdown"]}
    body = [[phase, *(num(cpu[(env, side, phase)], 0) if (env, side, phase) in cpu else "–"
                      for env, side in columns)] for phase in phases]
    headers = ["phase", *(f"{env} {side}" for env, side in columns)]
    return "CPU ms per iteration, by phase:\n\n" + table(headers, body)


def gpu_vs_rsl_rl(results: Results) -> str:
    """rsl_rl against rlpipe with the store off and on, per GPU results file (``peers/gpu_vs_rsl_rl.py``)."""
    blocks = []
    for name in results.names("gpu_vs_rsl_rl*.json"):
        data = json.loads((results.folder / name).read_text())
        if data.get("device", "cpu").startswith("cpu"):
            continue  # a check that the sides run, shown with the other results files
        data = results.load(name)
        sides = list(dict.fromkeys(r["side"] for r in data["rows"]))
        stores = [s for s in sides if s.startswith("rlpipe+store")]
        by = {(r["num_envs"], r["side"]): r for r in data["rows"]}
        rows = []
        for n in sorted({r["num_envs"] for r in data["rows"]}):
            cells = [num(n)]
            for side in sides:
                row = by.get((n, side))
                ratio_ = f" ({ratio(row['vs_rsl_rl'])})" if row and row.get("vs_rsl_rl") else ""
                cells.append(f"{num(row['sps'])}{ratio_}" if row else "–")
            off = by.get((n, "rlpipe"))
            cells += [ratio(by[n, s]["iteration_s"] / off["iteration_s"]) if off and (n, s) in by else "–"
                      for s in stores]
            cells.append(" / ".join(num(by[n, s].get("peak_gpu_mb", float("nan"))) if (n, s) in by else "–"
                                    for s in sides))
            rows.append(cells)
        header = ["envs", *[f"{s} env steps/s" for s in sides], *[f"{s}: time on / off" for s in stores],
                  "peak GPU MB " + " / ".join(sides)]
        note = f" — {data['measured']}." if "measured" in data else ""
        blocks.append(f"**`{name}`**{note}\n\n" + table(header, rows) + "\n\n"
                      + machine(data.get("environment")))
    return "\n\n".join(blocks)


def compiled(results: Results) -> str:
    """Eager against compiled runs on the CPU, compile time and cache counted (``speed/compile.py``)."""
    data = results.load("compile.json")
    rows = []
    for name, workload in data["workloads"].items():
        summary = workload["summary"]
        for mode in ("eager", "cold", "warm"):
            s = summary[mode]
            wall, sps, comp = s["wall_s"], s["steady_sps"], s["compile_s"]
            pays = s.get("break_even_iterations")
            rows.append([
                name, mode, f"{num(wall['median'], 1)} ({num(wall['min'], 1)}–{num(wall['max'], 1)})",
                "–" if mode == "eager" else f"{num(comp['median'], 1)} ({num(comp['min'], 1)}–{num(comp['max'], 1)})",
                f"{num(sps['median'])} ({num(sps['min'])}–{num(sps['max'])})",
                "1.00×" if mode == "eager" else ratio(s["steady_speedup"]),
                "–" if mode == "eager" else ("never" if pays is None else num(pays, 0)),
            ])
    header = ["workload", "mode", "wall s (range)", "compile s (range)", "steady env steps/s (range)",
              "steady vs eager", "iterations to pay back"]
    note = (f"{data['rounds']} interleaved rounds, {data['date']}; 1-minute load average "
            f"{data['load_average'][0]} → {data['load_average'][1]} on this machine's cores.")
    return note + "\n\n" + table(header, rows) + "\n\n" + machine(data.get("environment"))


def _span(values: list[float] | None, digits: int = 3, unit: str = "") -> str:
    """``0.147–0.198`` (one value when both ends agree), ``–`` for ``None``."""
    if values is None:
        return "–"
    low, high = values
    return f"{num(low, digits)}{unit}" if low == high else f"{num(low, digits)}–{num(high, digits)}{unit}"


def store_diag(results: Results) -> str:
    """Where the store's cost on a GPU came from (transcribed measurement notes, ``store_diag_h200.json``)."""
    data = results.load("store_diag_h200.json")
    rows = [[num(r["num_envs"]), _span(r["off_s"]), f"{_span(r['on_s'])} ({_span(r['on_vs_off'], 2, '×')})",
             _span(r["submit_wait_ms"], 0), _span(r["final_flush_ms"], 0),
             _span(r["staging_only_vs_off"], 2, "×"), _span(r["tofile_vs_off"], 2, "×"),
             _span(r["zarr_python_vs_off"], 2, "×"),
             num(r["written_mb_8_stores"])] for r in data["rows"]]
    gil = data["cpu_gil"]
    return (f"{data['measured']}.\n\n" + table(
        ["envs", "store off s/iteration", "store on (writer thread) s/iteration", "submit waited ms",
         "final flush ms", "staging only", "one `tofile` per leaf", "`RLPIPE_FAST=0`",
         "MB written (8 stores)"],
        rows) + f"\n\nMethod: {data['method']} Disk (`dd`, fdatasync): {data['disk_dd_gb_per_s']} GB/s. "
        f"{gil['what']}: the writer thread took {gil['writer_thread_s_per_rollout']} s per rollout, one "
        f"`tofile` per leaf {gil['tofile_thread_s_per_rollout']} s ({gil['tofile_alone_s_per_rollout']} s "
        f"alone). Recorded by: {data['script']}.")


def gil_tax(results: Results) -> str:
    """Main-thread torch ops/s beside each store writer (``speed/gil_tax.py``)."""
    data = results.load("gil_tax.json")
    args = data["args"]
    rows = [[r["mode"], num(r["ops_per_s"]), ratio(r["vs_none"]),
             ", ".join(f"{x:.3f}" for x in r["vs_none_per_round"]),
             num(r["write_mb_per_s"], 0) if r["write_mb_per_s"] is not None else "–"] for r in data["rows"]]
    size = f"{args['num_envs']} envs × {args['horizon']} steps ({num(data['rollout_mb'], 1)} MB)"
    return (f"Rollouts of {size}, {args['op_size']}² `addmm` + `relu_` on the main thread, "
            f"{args['rounds']} interleaved rounds of {args['seconds']} s per writer.\n\n" + table(
                ["writer", "main-thread torch ops/s", "vs no writer (median)", "per round", "written MB/s"],
                rows) + "\n\n" + machine(data.get("environment")))


def writer_start(results: Results) -> str:
    """What the writer process costs a small CPU run against the thread (``speed/writer_start.py``)."""
    data = results.load("writer_start.json")
    out = []
    if "store" in data:
        keys = (("first_submit_s", "first submit ms"), ("first_on_disk_s", "first rollout on disk ms"),
                ("per_rollout_s", "per rollout (submit + flush) ms"), ("close_s", "close ms"))
        rows = [[r["writer"], *[(ratio(r[k]) if "/" in r["writer"] else num(1e3 * r[k], 1)) for k, _ in keys]]
                for r in data["store"]["rows"]]
        out.append(table(["writer", *[label for _, label in keys]], rows))
    if "run" in data:
        args = data["args"]
        rows = [[r["writer"], ratio(r["wall_s"]) if "/" in r["writer"] else num(r["wall_s"], 2)]
                for r in data["run"]["rows"]]
        run = f"`rlpipe run {Path(args['params']).name}`, {args['iterations']} iterations, tracking off"
        out.append(f"{run}, {args['rounds']} interleaved rounds:\n\n"
                   + table(["writer", "wall s (median)"], rows))
    return "\n\n".join(out) + "\n\n" + machine(data.get("environment"))


def distillation(results: Results) -> str:
    """Teacher → student, per task and seed (``learning/distillation.py``)."""
    blocks = []
    for name in results.names("distillation_*.json"):
        data = results.load(name)
        routes = [r for r in ("offline", "online", "dagger") if r in data["seeds"][0]]
        header = ["seed", "teacher", "teacher env steps", *[f"{r} student" for r in routes],
                  *[f"{r} / teacher" for r in routes], *[f"{r} env steps" for r in routes],
                  *[f"{r} wall s" for r in routes]]
        rows = [[str(s["seed"]), num(s["teacher"]["score"], 3), num(s["teacher"]["env_steps"]),
                 *[num(s[r]["score"], 3) for r in routes], *[num(s[f"{r}_ratio"], 3) for r in routes],
                 *[num(s[r]["env_steps"]) for r in routes], *[num(s[r]["wall_s"]) for r in routes]]
                for s in data["seeds"]]
        blocks.append(f"**{data['task']}** (`{data['metric']}`)\n\n" + table(header, rows))
    return "\n\n".join(blocks)


def offpolicy_mujoco(results: Results) -> str:
    """SAC/TD3 on MuJoCo (``learning/offpolicy_mujoco.py``): per task, then every run and SB3's timing."""
    data = results.load("offpolicy_mujoco.json")
    summary_rows = []
    for name, s in data["summary"].items():
        point, low, high = s["iqm"]
        summary_rows.append([
            f"`{name}`", num(s["steps"]), ", ".join(str(x) for x in s["seeds"]),
            f"{num(point)} [{num(low)}, {num(high)}]", f"{num(s['min'])}–{num(s['max'])}",
            f"{num(s['zoo_sac']['return'])} ({s['zoo_sac']['env']}, 1M)", ratio(s["iqm_over_zoo"]),
            f"{s['wall_1m_s_mean'] / 3600:.2f} h",
            ratio(s["wall_1m_over_sb3"]) if "wall_1m_over_sb3" in s else "–",
            ratio(s["cpu_per_step_over_sb3"]) if "cpu_per_step_over_sb3" in s else "–"])
    runs = [[r["algo"], r["env"], r["seed"], num(r["steps"]), num(r["eval_return"]), num(r["wall_s"]),
             num(r["cpu_s"]), num(r["steps_per_s"]), num(r["learn_steps_per_s"] or 0),
             f"{(r['wall_1m_s'] or 0) / 3600:.2f} h",
             " → ".join(f"{x[0]:.1f}" for x in (r["load_avg_start"], r["load_avg_end"]))]
            for r in data["runs"]]
    return (table(["algo/task", "env steps", "seeds", "IQM [95 % CI]", "min–max", "rl-zoo SAC", "IQM / zoo",
                   "1M wall (scaled)", "1M wall / SB3's", "CPU s per step / SB3's"], summary_rows)
            + "\n\n" + table(["run", "env", "seed", "env steps", "eval return (det.)", "wall s", "CPU s",
                               "env steps/s", "steps/s learning", "1M wall (scaled)", "load average"], runs)
            + f"\n\n*{data['cpu']} CPUs; commands: " + "; ".join(f"`{c}`" for c in data["commands"]) + "*")


def others(results: Results) -> str:
    """Every results file no other table read: its scalar fields, and its rows when it has a list."""
    blocks = []
    for name in results.names("*.json"):
        if name in results.read:
            continue
        if name in ELSEWHERE:
            blocks.append(f"**`{name}`** is shown on the {ELSEWHERE[name]} page.")
            continue
        data = results.load(name)
        rows = data.get("rows") if isinstance(data, dict) else data
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            keys = [k for k in rows[0] if not isinstance(rows[0][k], (dict, list))]
            body = table(keys, [[_cell(r.get(k)) for k in keys] for r in rows])
        else:
            body = table(["field", "value"], [[k, _cell(v)] for k, v in data.items()
                                              if not isinstance(v, (dict, list))])
        blocks.append(f"**`{name}`**\n\n{body}")
    return "\n\n".join(blocks) if blocks else "Every results file is shown in a table above."


ELSEWHERE = {"zoo.json": "[Results](results.md)", "dataset_export.json": "[Datasets](datasets.md)",
             "offpolicy_mujoco.json": "[Off-policy](off-policy.md)"}
"""Results files another page's hook shows (``docs/hooks/zoo.py``): linked here, not tabled again."""


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return num(value, 3 if abs(value) < 100 else 0)
    return str(value)


TABLES: dict[str, Callable[[Results], str]] = {
    "w1": w1, "halfcheetah": halfcheetah, "cuda_throughput": cuda_throughput, "cuda_scaling": cuda_scaling,
    "cuda_sync": cuda_sync, "cartpole_step": cartpole_step, "push_cube": push_cube,
    "pixel_cartpole": pixel_cartpole, "envpool_loop": envpool_loop, "distillation": distillation,
    "gpu_vs_rsl_rl": gpu_vs_rsl_rl, "store_diag": store_diag, "gil_tax": gil_tax,
    "writer_start": writer_start, "dataset_export": dataset_export, "compile": compiled,
    "offpolicy_mujoco": offpolicy_mujoco,
    "others": others,
}
"""Marker name → the function that builds its Markdown; ``others`` must come last on the page."""


# --- mkdocs events ----------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace every ``<!-- results: NAME -->`` marker of the :data:`PAGES` with its table."""
    if page.file.src_uri not in PAGES:
        return markdown
    results, shown = Results(project_root(config) / "benchmarks" / "results"), set()

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in TABLES:
            raise PluginError(f"docs/{page.file.src_uri}: no results table {name!r}; accepted: "
                              f"{', '.join(TABLES)}")
        text = TABLES[name](results)
        new = sorted(results.read - shown)  # the files this table read first
        shown.update(results.read)
        return text + ("\n\n" + source(*new) if new else "")

    return MARKER.sub(render, markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Publish the benchmark figures (``benchmarks/<group>/*.png``) as ``assets/benchmarks/<name>.png``."""
    for png in sorted((project_root(config) / "benchmarks").glob("*/*.png")):
        files.append(File.generated(config, f"assets/benchmarks/{png.name}", abs_src_path=str(png)))
    return files

"""What keeping every DVC experiment's data costs: per iteration (hashing, copying) and on disk.

Two parts (``--part``):

``cost``  The ways of keeping experiment data on real massive-batch data (``--source``: a run dir of
          ``rlpipe run`` with the massive-batch workload, e.g. made by the command in the README of
          benchmarks/). In a fresh git + DVC repo per measurement, a one-stage pipeline writes the
          source's rollouts and checkpoints, either as DVC-cached outs (``cache.type`` hardlink,
          symlink, copy; reflink where the file system has it) or into a run dir outside DVC (what
          rlpipe does: ``data/exps/<name>/``, only the small ``run.json`` is an out). Mechanisms
          alternate round by round; the figure is ``dvc repro`` time minus the stage command's own
          time (DVC's saving work), and its excess over the run-dir mechanism, per iteration. Disk:
          bytes under the repo (workspace + cache, a hardlinked file counted once).
``exps``  The real thing: in a git copy of the working tree, queue ``--experiments`` experiments
          of ``params.yaml`` (the test suite's tiny sizes unless ``--set``), run them with
          ``dvc exp run --run-all --jobs 2`` (``dvc queue start --jobs 2`` that waits), and report
          each experiment's disk (``data/exps/<name>``), the DVC cache and what is left in
          ``.dvc/tmp/exps``.

Run: ``.venv/bin/python benchmarks/speed/dvc_experiments.py --part cost --source /tmp/massive/cartpole_ppo``
and ``.venv/bin/python benchmarks/speed/dvc_experiments.py --part exps``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import PROJECT_ROOT, environment, median, print_machine

BIN = Path(sys.executable).parent
MECHANISMS = ("rundir", "cache-hardlink", "cache-symlink", "cache-copy", "cache-reflink")

PRODUCE = """\
import json, shutil, sys, time
from pathlib import Path
t0 = time.perf_counter()
source, target = Path(sys.argv[1]), Path(sys.argv[2])
for part in ("rollouts", "checkpoints"):
    shutil.rmtree(target / part, ignore_errors=True)
    shutil.copytree(source / part, target / part)
Path("out").mkdir(exist_ok=True)
Path("out/run.json").write_text(json.dumps({"run_dir": str(target)}))
Path("cmd_s").write_text(str(time.perf_counter() - t0))
"""


def sh(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DVC_")} | (extra_env or {})
    env |= {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "DVC_NO_ANALYTICS": "1",
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def disk_bytes(path: Path) -> int:
    """Bytes allocated under ``path``, each inode once (``du`` semantics: hardlinks count once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def reflink_supported(folder: Path) -> bool:
    src, dst = folder / ".reflink-src", folder / ".reflink-dst"
    src.write_bytes(b"x")
    ok = subprocess.run(["cp", "--reflink=always", str(src), str(dst)], capture_output=True).returncode == 0
    src.unlink()
    dst.unlink(missing_ok=True)
    return ok


def stage_yaml(mechanism: str, source: Path) -> str:
    if mechanism == "rundir":
        return (
            f"stages:\n  train:\n    cmd: python produce.py {source} data/exps/e1/run\n"
            "    deps: [produce.py]\n    outs:\n      - out/run.json:\n          cache: false\n"
        )
    return (
        f"stages:\n  train:\n    cmd: python produce.py {source} out\n    deps: [produce.py]\n"
        "    outs:\n      - out/rollouts\n      - out/checkpoints\n      - out/run.json:\n"
        "          cache: false\n"
    )


def measure(mechanism: str, source: Path, scratch: Path) -> dict[str, float]:
    """One ``dvc repro`` of the one-stage pipeline in a fresh repo: DVC's own seconds and the disk."""
    repo = Path(tempfile.mkdtemp(prefix=f"{mechanism}-", dir=scratch))
    (repo / "produce.py").write_text(PRODUCE)
    (repo / "dvc.yaml").write_text(stage_yaml(mechanism, source))
    (repo / ".gitignore").write_text("/data/\n/cmd_s\n")
    sh(repo, "git", "init", "-q")
    sh(repo, str(BIN / "dvc"), "init", "-q")
    if mechanism.startswith("cache-"):
        sh(repo, str(BIN / "dvc"), "config", "cache.type", mechanism.removeprefix("cache-"))
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-qm", "init")
    start = time.perf_counter()
    sh(repo, str(BIN / "dvc"), "repro", "-q")
    total = time.perf_counter() - start
    command = float((repo / "cmd_s").read_text())
    used = disk_bytes(repo) - disk_bytes(repo / ".git")
    shutil.rmtree(repo)
    return {"repro_s": total, "command_s": command, "dvc_s": total - command, "disk_bytes": used}


def part_cost(args: argparse.Namespace) -> dict[str, Any]:
    source = args.source.resolve()
    iterations = len(list((source / "rollouts").glob("iter-*.zarr")))
    data = disk_bytes(source / "rollouts") + disk_bytes(source / "checkpoints")
    scratch = Path(tempfile.mkdtemp(prefix="rlpipe-dvc-bench-", dir=args.scratch))
    mechanisms = [m for m in MECHANISMS if m != "cache-reflink" or reflink_supported(scratch)]
    samples: dict[str, list[dict[str, float]]] = {m: [] for m in mechanisms}
    try:
        for _ in range(args.rounds):
            for mechanism in mechanisms:
                samples[mechanism].append(measure(mechanism, source, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = median([s["dvc_s"] for s in samples["rundir"]])
    rows = {}
    for mechanism, runs in samples.items():
        dvc_s = median([s["dvc_s"] for s in runs])
        rows[mechanism] = {
            "dvc_s": dvc_s,
            "extra_s_per_iteration": (dvc_s - base) / iterations,
            "command_s": median([s["command_s"] for s in runs]),
            "disk_mb": runs[0]["disk_bytes"] / 2**20,
            "disk_vs_data": runs[0]["disk_bytes"] / data,
        }
    print(
        f"source: {iterations} iterations, {data / 2**20:.1f} MB of rollouts + checkpoints; "
        f"{args.rounds} rounds, medians"
    )
    print(f"{'mechanism':<16}{'dvc s':>8}{'extra s/iter':>14}{'copy s':>9}{'disk MB':>9}{'× data':>8}")
    for mechanism, row in rows.items():
        print(
            f"{mechanism:<16}{row['dvc_s']:>8.2f}{row['extra_s_per_iteration']:>14.3f}"
            f"{row['command_s']:>9.2f}{row['disk_mb']:>9.1f}{row['disk_vs_data']:>8.2f}"
        )
    return {"iterations": iterations, "data_bytes": data, "rows": rows, "samples": samples}


TINY = {
    "trainer.num_envs": 8,
    "trainer.buffer_size": 8,
    "trainer.iterations": 2,
    "trainer.num_eval_envs": 2,
    "trainer.num_threads": 1,
    "algorithm.cfg.batch_size": 32,
    "algorithm.cfg.n_epochs": 1,
    "eval.num_envs": 2,
    "eval.num_episodes": 1,
}
"""The test suite's tiny sizes (tests/dvc/test_pipeline.py), the default of ``--part exps``."""


def copy_project(target: Path, params: dict[str, Any]) -> Path:
    """The working tree (tracked and untracked-but-not-ignored files) as a fresh one-commit repo."""
    import yaml

    listed = sh(PROJECT_ROOT, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    for rel in filter(None, listed.split("\0")):
        if (PROJECT_ROOT / rel).is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / rel, target / rel)
    (target / "dvc.lock").unlink(missing_ok=True)
    data = yaml.safe_load((target / "params.yaml").read_text())
    for key, value in params.items():
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value) if isinstance(value, str) else value
    (target / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    for args in (("git", "init", "-q"), ("git", "add", "-A"), ("git", "commit", "-qm", "baseline")):
        sh(target, *args)
    return target


def part_exps(args: argparse.Namespace) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="rlpipe-dvc-exps-", dir=args.scratch))
    params = dict(kv.split("=", 1) for kv in args.set) if args.set else dict(TINY)
    try:
        repo = copy_project(scratch / "repo", params)
        env = {"PYTHONPATH": str(PROJECT_ROOT)}
        names = [f"e{i + 1}" for i in range(args.experiments)]
        for i, name in enumerate(names):
            sh(
                repo,
                str(BIN / "dvc"),
                "exp",
                "run",
                "--queue",
                "-n",
                name,
                "-S",
                f"algorithm.cfg.clip_coef={0.1 + 0.05 * i:.2f}",
                extra_env=env,
            )
        start = time.perf_counter()
        sh(repo, str(BIN / "dvc"), "exp", "run", "--run-all", "--jobs", "2", extra_env=env)
        wall = time.perf_counter() - start
        rows = {name: disk_bytes(repo / "data" / "exps" / name) for name in names}
        cache, tmp = repo / ".dvc" / "cache", repo / ".dvc" / "tmp" / "exps"
        result = {
            "wall_s": wall,
            "params": params,
            "per_experiment_bytes": rows,
            "dvc_cache_bytes": disk_bytes(cache) if cache.exists() else 0,
            "dvc_tmp_exps_bytes": disk_bytes(tmp) if tmp.exists() else 0,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name, size in rows.items():
        print(f"{name:<8}{size / 2**20:>9.2f} MB in data/exps/{name}")
    print(
        f"DVC cache {result['dvc_cache_bytes'] / 2**20:.2f} MB, .dvc/tmp/exps "
        f"{result['dvc_tmp_exps_bytes'] / 2**20:.2f} MB; {args.experiments} experiments on 2 jobs "
        f"in {wall:.0f} s"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("cost", "exps"), default="cost")
    parser.add_argument(
        "--source", type=Path, default=None, help="cost: a run dir holding rollouts/ and checkpoints/"
    )
    parser.add_argument("--rounds", type=int, default=3, help="cost: interleaved rounds (default 3)")
    parser.add_argument("--experiments", type=int, default=3, help="exps: how many to queue (default 3)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="exps: params for every experiment (default: the test suite's tiny sizes)",
    )
    parser.add_argument("--scratch", type=Path, default=None, help="where the repos go (default: $TMPDIR)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    if args.part == "cost" and (args.source is None or not (args.source / "rollouts").is_dir()):
        parser.error("--source: a run dir holding rollouts/ and checkpoints/ is needed for --part cost")
    print_machine()
    result = part_cost(args) if args.part == "cost" else part_exps(args)
    if args.json:
        args.json.write_text(
            json.dumps({"part": args.part, **result, "environment": environment()}, indent=2, default=str)
        )


if __name__ == "__main__":
    main()

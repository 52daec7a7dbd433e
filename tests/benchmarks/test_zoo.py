"""benchmarks/zoo.py on a test-size config: the JSON's rows and summary, the curve PNG, read-back and resume.

Every run is a real ``rlpipe run`` subprocess of ``tests/fixtures/zoo/cartpole.yaml`` (the torch
CartPole, 8 envs × 16 steps an iteration, the store on) for one or two iterations, MLflow off: two
seeds run once for the module, then one of them interrupted and resumed. The script itself is its
``main`` called in this process (torch and rlpipe already loaded), as it is run from the command line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "zoo.py"
CONFIGS = ROOT / "tests" / "fixtures" / "zoo"
STEPS = 8 * 16  # env steps of one iteration of the fixture config


def arguments(tmp: Path, out: Path | None, *args: str) -> list[str]:
    """The fixture configs with MLflow off, run dirs and outputs under ``tmp`` (run dirs in ``out``)."""
    return [
        "--configs",
        str(CONFIGS),
        "--set",
        "tracking.backend=none",
        "--out",
        str(out or tmp / "out"),
        "--json",
        str(tmp / "zoo.json"),
        "--plots",
        str(tmp / "png"),
        *args,
    ]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zoo_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def in_process(script: ModuleType):
    """``main`` of the script in this process; torch's thread count is restored after."""
    threads = torch.get_num_threads()
    yield lambda tmp, *args, out=None: script.main(arguments(tmp, out, *args))
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def first(script: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Seeds 0 and 1 for one iteration, two ``rlpipe run`` processes at once: the runs the tests read."""
    tmp, stdout, stderr = tmp_path_factory.mktemp("zoo"), io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = script.main(arguments(tmp, None, "--seeds", "0", "1", "--iterations", "1", "--jobs", "2"))
    finally:
        torch.set_num_threads(threads)
    assert code == 0, stdout.getvalue() + stderr.getvalue()
    assert stdout.getvalue().count(": starting") == 2
    return tmp, json.loads((tmp / "zoo.json").read_text())


def test_each_seed_is_one_rlpipe_run_whose_figures_are_rows(first: tuple[Path, dict]):
    tmp, data = first
    assert data["benchmark"] == "zoo" and data["configs"] == "tests/fixtures/zoo" and data["failed"] == []
    rows = data["rows"]
    assert [(r["task"], r["seed"]) for r in rows] == [("cartpole", 0), ("cartpole", 1)]
    for row in rows:
        run_dir = tmp / "out" / "cartpole" / f"seed{row['seed']}" / "zoo_cartpole"
        metrics = json.loads((run_dir / "metrics.json").read_text())
        params = yaml.safe_load((run_dir / "params.yaml").read_text())
        assert params["trainer"]["exp_name"] == "zoo_cartpole" and params["trainer"]["seed"] == row["seed"]
        assert params["trainer"]["num_threads"] == 1 and params["trainer"]["save_freq"] == -(-STEPS // 10)
        assert (run_dir / "rollouts" / "iter-000001.zarr").is_dir()  # the store was on
        assert row["run_dir"] == str(run_dir) and row["config"] == "tests/fixtures/zoo/cartpole.yaml"
        assert (row["env_id"], row["algorithm"], row["iterations"]) == ("CartPole", "ppo", 1)
        assert row["env_steps"] == row["budget_env_steps"] == STEPS
        assert row["eval_return"] == metrics["eval/return_mean"] and row["eval_episodes"] == 2
        assert row["train_return"] == metrics["train/episode_return_mean"]
        assert row["eval_success_rate"] is None  # CartPole reports no success
        assert row["env_steps_per_s"] == STEPS / metrics["wall_s"]
        assert row["cpu_s"] > 0 and row["command_wall_s"] > row["wall_s"]
        assert (row["segments"], row["resumed"]) == (1, False)
        assert row["curve"]["env_steps"] == row["curve"]["eval_env_steps"] == [STEPS]
        assert row["curve"]["eval_return"] == [row["eval_return"]]


def test_the_summary_is_the_mean_and_std_over_seeds_beside_the_reference(first: tuple[Path, dict]):
    tmp, data = first
    task = data["summary"]["cartpole"]
    evals = [r["eval_return"] for r in data["rows"]]
    assert task["seeds"] == [0, 1] and task["n"] == 2 and task["budget_env_steps"] == STEPS
    assert task["eval_return_mean"] == pytest.approx(sum(evals) / 2)
    assert task["eval_return_std"] == pytest.approx(abs(evals[0] - evals[1]) / 2)  # population std of two
    assert task["cpu_s_mean"] == pytest.approx(statistics.fmean(r["cpu_s"] for r in data["rows"]))
    assert task["reference"] == 500.0 and task["reference_budget"] == 100_000
    assert "rl-baselines3-zoo benchmark.md" in task["reference_source"]
    assert "CartPole-v1" in task["reference_source"]
    assert task["ratio_to_reference"] == pytest.approx(task["eval_return_mean"] / 500.0)
    assert task["eval_return_ci"]["mean"][0] == pytest.approx(task["eval_return_mean"])
    assert task["ratio_ci"]["iqm"] == pytest.approx([v / 500.0 for v in task["eval_return_ci"]["iqm"]])
    assert task["ratios"] == pytest.approx([v / 500.0 for v in evals])
    assert set(task["seeds_at_least"]) == {"0.5", "0.8"}
    for name in ("summary-ratios.png", "summary-profile.png"):
        assert (tmp / "png" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = tmp / "png" / "cartpole.png"
    assert task["curve_png"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_a_second_invocation_reads_finished_runs_back_instead_of_running_them(first, in_process, capsys):
    tmp, data = first
    assert in_process(tmp, "--seeds", "0", "1", "--iterations", "1") == 0
    stdout = capsys.readouterr().out
    assert stdout.count("finished earlier, read back") == 2 and "starting" not in stdout
    for seed in (0, 1):
        segments = json.loads((tmp / "out" / "cartpole" / f"seed{seed}" / "zoo_segments.json").read_text())
        assert len(segments) == 1  # no second rlpipe process
    again = json.loads((tmp / "zoo.json").read_text())
    assert again["rows"] == data["rows"] and again["summary"] == data["summary"]


def test_an_interrupted_run_continues_from_its_checkpoint(first, in_process, capsys, tmp_path: Path):
    tmp, data = first
    out = tmp_path / "out"
    shutil.copytree(tmp / "out" / "cartpole" / "seed1", out / "cartpole" / "seed1")
    (out / "cartpole" / "seed1" / "zoo_cartpole" / "metrics.json").unlink()  # a checkpoint, no final summary
    code = in_process(tmp_path, "--seeds", "1", "--iterations", "2", out=out)
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "cartpole seed 1: resuming" in captured.out
    log = (out / "cartpole" / "seed1" / "rlpipe.log").read_text()
    assert log.splitlines()[-1].startswith("done: 2 iterations") or "done: 2 iterations" in log
    assert any(line.startswith("$ rlpipe run") and line.endswith("--resume") for line in log.splitlines())
    assert "resume: continuing from" in log and "(iteration 1)" in log
    row = json.loads((tmp_path / "zoo.json").read_text())["rows"][0]
    assert (row["iterations"], row["env_steps"], row["segments"], row["resumed"]) == (2, 2 * STEPS, 2, True)
    before = data["rows"][1]["curve"]
    assert row["curve"]["eval_env_steps"] == [STEPS, 2 * STEPS]
    assert row["curve"]["eval_return"][0] == before["eval_return"][0]  # iteration 1 kept, not re-run


def test_a_finished_run_of_other_training_params_is_refused(first, in_process, capsys, tmp_path: Path):
    tmp, _ = first
    code = in_process(
        tmp_path, "--seeds", "0", "--iterations", "1", "--set", "algorithm.cfg.clip_coef=0.1", out=tmp / "out"
    )
    assert code == 1
    refusal = "finished with other training params (algorithm.cfg.clip_coef: 0.2 there, 0.1 now)"
    assert refusal in capsys.readouterr().err
    assert json.loads((tmp_path / "zoo.json").read_text())["failed"][0]["seed"] == 0


def test_user_errors_are_one_line_and_exit_2(in_process, capsys, tmp_path: Path):
    with pytest.raises(SystemExit) as exit_:
        in_process(tmp_path, "--tasks", "nope")
    assert exit_.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(f"--tasks: no config {CONFIGS}/nope.yaml; accepted: cartpole")
    )
    with pytest.raises(SystemExit) as exit_:
        in_process(tmp_path, "--set", "trainer.num_envs=0")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().startswith(f"error: {CONFIGS}/cartpole.yaml: trainer.num_envs")
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_task_reference_wins_over_its_env_ids(script: ModuleType):
    """CartPole without velocities runs on the torch CartPole, but is compared with rl-zoo's CartPoleNoVel."""
    masked, plain = script.reference("CartPole", "ppo", "cartpole_novel"), script.reference("CartPole", "ppo")
    assert "CartPoleNoVel-v1" in masked["source"] and "CartPoleNoVel" not in plain["source"]
    assert script.reference("CartPole", "grpo", "cartpole_grpo")["source"].startswith("none found")


@pytest.mark.parametrize(
    ("env_id", "algorithm", "why"),
    [
        ("CartPole", "grpo", "GRPO"),
        ("MetaWorld/Push-v3", "ppo", "Meta-World v3"),
        ("PandaPickCube-v1", "ppo", "MuJoCo Playground"),
        ("PushCube", "ppo", "rlpipe's own task"),
    ],
)
def test_a_missing_reference_says_what_was_looked_for(
    script: ModuleType, env_id: str, algorithm: str, why: str
):
    ref = script.reference(env_id, algorithm)
    assert ref["value"] is None and ref["source"].startswith("none found: ") and why in ref["source"]
    assert script.reference("Acrobot-v1", "ppo")["source"] == "none found"


@pytest.mark.parametrize(
    ("tokens", "seeds"),
    [
        (["0-9"], list(range(10))),
        (["0", "1", "2"], [0, 1, 2]),
        (["0-2", "7", "1-3"], [0, 1, 2, 7, 3]),
    ],
)
def test_seeds_are_integers_and_inclusive_ranges(script: ModuleType, tokens: list[str], seeds: list[int]):
    assert script.seed_list(tokens) == seeds


@pytest.mark.parametrize("token", ["3-1", "a", "-2", "1-", "0-x"])
def test_a_bad_seed_is_one_line_and_exit_2(in_process, capsys, tmp_path: Path, token: str):
    with pytest.raises(SystemExit) as exit_:
        in_process(tmp_path, "--seeds", "0", token)
    assert exit_.value.code == 2
    accepted = "accepted: non-negative integers, ranges low-high (low ≤ high)"
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"--seeds: got {token!r}; {accepted}")
    assert not (tmp_path / "out").exists()


def row(seed: int, eval_return: float) -> dict:
    """A row as an earlier zoo.py wrote it for the fixture's CartPole (reference 500), run dir elsewhere."""
    return {
        "task": "cartpole",
        "config": "tests/fixtures/zoo/cartpole.yaml",
        "env_id": "CartPole",
        "algorithm": "ppo",
        "seed": seed,
        "run_dir": f"elsewhere/seed{seed}",
        "env_steps": STEPS,
        "budget_env_steps": STEPS,
        "eval_return": eval_return,
        "eval_success_rate": None,
        "eval_success_at_end": None,
        "train_return": eval_return,
        "wall_s": 2.0,
        "cpu_s": None,
        "env_steps_per_s": STEPS / 2.0,
        "curve": {
            "env_steps": [STEPS],
            "train_return": [eval_return],
            "eval_env_steps": [STEPS],
            "eval_return": [eval_return],
        },
    }


def test_from_json_re_aggregates_the_rows_without_run_directories(in_process, capsys, tmp_path: Path):
    old = {
        "benchmark": "zoo",
        "configs": "tests/fixtures/zoo",
        "seeds": [0, 1, 2, 3],
        "jobs": 2,
        "rows": [row(s, r) for s, r in enumerate([100.0, 450.0, 500.0, 500.0])],
        "summary": {"cartpole": {"task": "cartpole", "eval_return_mean": 387.5}},  # an older summary
        "failed": [],
        "environment": {"cpu_count": 16, "torch": "measured there"},
    }
    (tmp_path / "zoo.json").write_text(json.dumps(old))
    assert in_process(tmp_path, "--from-json", out=tmp_path / "nowhere") == 0
    assert "summary of 4 rows rewritten" in capsys.readouterr().out
    data = json.loads((tmp_path / "zoo.json").read_text())
    kept = {k: v for k, v in old.items() if k != "summary"}
    assert {k: v for k, v in data.items() if k != "summary"} == kept  # the machine that measured, too
    task = data["summary"]["cartpole"]
    assert task["n"] == 4 and task["eval_return_mean"] == pytest.approx(387.5)
    assert task["eval_return_ci"]["iqm"][0] == pytest.approx(475.0)  # the middle two of 100, 450, 500, 500
    assert task["ratios"] == pytest.approx([0.2, 0.9, 1.0, 1.0])
    assert task["seeds_at_least"] == {"0.5": 0.75, "0.8": 0.75}
    assert {p.name for p in (tmp_path / "png").iterdir()} == {
        "cartpole.png",
        "summary-ratios.png",
        "summary-profile.png",
    }
    assert not (tmp_path / "nowhere").exists()  # nothing trained, no run directory read or made


def test_from_json_without_zoo_results_is_one_line_and_exit_2(in_process, capsys, tmp_path: Path):
    (tmp_path / "zoo.json").write_text("[]")
    assert in_process(tmp_path, "--from-json") == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --json {tmp_path / 'zoo.json'}: no zoo results there "
        "(a JSON object with 'rows' written by benchmarks/zoo.py)"
    )

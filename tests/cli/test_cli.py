import subprocess
import sys

import pytest
from click.testing import CliRunner

from rlpipe.cli import cli

FAST = [
    "--set",
    "trainer.num_envs=8",
    "--set",
    "trainer.buffer_size=8",
    "--set",
    "trainer.iterations=2",
    "--set",
    "tracking.backend=none",
    "--set",
    "trainer.num_eval_envs=2",
    "--set",
    "algorithm.cfg.batch_size=32",
    "--set",
    "algorithm.cfg.n_epochs=1",
]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.cfg.batch_size=0", "algorithm.cfg.batch_size: Input should be greater than or equal"),
        (
            "env.id=NoSuchEnv",
            "env.id: unknown env 'NoSuchEnv' for backend auto; accepted: a registered torch "
            "env (CartPole, DeepSea, Pendulum",
        ),
        ("algorithm.name=dqn", "algorithm.name: unknown algorithm 'dqn'; accepted:"),
        ("trainer.foo=1", "trainer.foo: unknown key"),
        ("policy.actor.network_cfg.activation=swish", "policy.actor.network_cfg.activation: unknown 'swish'"),
    ],
)
def test_bad_params_exit_2_with_one_line_and_write_nothing(tmp_path, override, message):
    result = CliRunner().invoke(
        cli, ["run", "params.yaml", "--set", f"trainer.data_dir={tmp_path / 'data'}", "--set", override]
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "store.budget={rate_gb_s: 1.0e-310, env_steps_per_s: 1.0e10}",
            "store.budget: rate_gb_s 1e-310 at env_steps_per_s 1e+10 allows 1e-311 bytes per env step",
        ),
        (
            "store.budget={rate_gb_s: 1.0e-300, env_steps_per_s: 1.0e300}",
            "store.budget.env_steps_per_s: Input should be less than or equal to 1000000000000",
        ),
        ("store.every=1000000000000", "store.every: 1000000000000 is more than trainer.iterations (2)"),
        (
            "store.budget={rate_gb_s: 1.0e-6, env_steps_per_s: 1.0e6}",
            "store.budget.rate_gb_s: rate_gb_s 1e-06 at 1000000 env steps/s allows 0.001 B per env step",
        ),
    ],
)
def test_a_store_policy_that_stores_nothing_or_overflows_exits_2_in_one_line(tmp_path, override, message):
    result = CliRunner().invoke(
        cli,
        ["run", "params.yaml", "--set", f"trainer.data_dir={tmp_path / 'data'}", *FAST, "--set", override],
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not (tmp_path / "data").exists()


def test_missing_params_file(tmp_path):
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "params file not found" in result.output


def test_run_writes_metrics_and_checkpoint(tmp_path):
    data = tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "-m", "rlpipe", "run", "params.yaml", "--set", f"trainer.data_dir={data}", *FAST],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    run_dir = data / "cartpole_ppo"
    import json

    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["iterations"] == 2 and metrics["env_steps"] == 2 * 8 * 8
    for key in ("wall_s", "train/episode_return_mean", "eval/return_mean"):
        assert key in metrics, key
    assert (run_dir / "checkpoints" / "latest").exists()
    assert "env_steps" in result.stdout


def test_fresh_run_into_earlier_run_is_refused_unless_overwrite(tmp_path):
    args = ["run", "params.yaml", "--set", f"trainer.data_dir={tmp_path}", *FAST]
    assert CliRunner().invoke(cli, args).exit_code == 0
    ckpt = tmp_path / "cartpole_ppo" / "checkpoints" / "latest"
    before = ckpt.read_text()
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2
    assert "holds an earlier run; use --resume" in refused.output
    assert ckpt.read_text() == before
    again = CliRunner().invoke(cli, [*args, "--overwrite"])
    assert again.exit_code == 0, again.output
    assert len(list((tmp_path / "cartpole_ppo" / "rollouts").glob("iter-*.zarr"))) == 2

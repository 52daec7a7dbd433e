"""``rlpipe.Trainer``: the same run as ``rlpipe run``, whole, iterated or step by step."""

from __future__ import annotations

from _offline_fixtures import PARAMS, assert_same_learner, set_args, tiny_overrides
from click.testing import CliRunner

from rlpipe import Trainer
from rlpipe.cli import cli
from rlpipe.envs import build_env


def ckpt(data_dir, k=4, exp="cartpole_ppo"):
    return data_dir / exp / "checkpoints" / f"ckpt-{k:06d}.pt"


def test_train_from_python_equals_rlpipe_run_bit_for_bit(tmp_path):
    cli_dir, py_dir = tmp_path / "cli", tmp_path / "py"
    result = CliRunner().invoke(cli, ["run", str(PARAMS), *set_args(cli_dir)])
    assert result.exit_code == 0, result.output
    summary = Trainer.from_params(PARAMS, overrides=tiny_overrides(py_dir)).train()
    assert summary["iterations"] == 4
    for k in (2, 4):
        assert_same_learner(ckpt(cli_dir, k), ckpt(py_dir, k))


def test_step_by_step_and_iterating_equal_train(tmp_path):
    whole = Trainer.from_params(PARAMS, tiny_overrides(tmp_path / "whole"))
    whole.train()
    steps = Trainer.from_params(PARAMS, tiny_overrides(tmp_path / "steps"))
    for _ in range(4):
        rollout = steps.collect()
        assert tuple(rollout.batch_size) == (8, 17)
        steps.update(rollout)
    steps.close()
    iterated = Trainer.from_params(PARAMS, tiny_overrides(tmp_path / "iter"))
    rows = [m["iteration"] for m in iterated]
    assert rows == [1.0, 2.0, 3.0, 4.0]
    for other in ("steps", "iter"):
        assert_same_learner(ckpt(tmp_path / "whole"), ckpt(tmp_path / other))


def test_total_steps_a_live_env_and_load_to_continue(tmp_path):
    env = build_env("CartPole", 8, "cpu")
    trainer = Trainer.from_params(PARAMS, tiny_overrides(tmp_path), env=env)
    summary = trainer.train(total_steps=2 * 8 * 16)
    assert summary["iterations"] == 2 and trainer.env is env
    assert trainer.save_checkpoint().name == "ckpt-000002.pt"
    resumed = Trainer.load(
        tmp_path / "cartpole_ppo", overrides={"trainer.iterations": 3, "trainer.enable_eval": True}
    )
    assert resumed.train()["iterations"] == 3
    assert resumed.evaluate()["eval/episodes"] >= 1


def test_a_gymnasium_vector_env_object_trains(tmp_path):
    import gymnasium
    from gymnasium.vector import AutoresetMode

    same_step = {"autoreset_mode": AutoresetMode.SAME_STEP}
    vec = gymnasium.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync", vector_kwargs=same_step)
    trainer = Trainer.from_params(PARAMS, tiny_overrides(tmp_path, "trainer.iterations=1"), env=vec)
    assert trainer.train()["env_steps"] == 8 * 16 and trainer.env.vec_env is vec
    other = gymnasium.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync")  # NEXT_STEP: wasteful
    try:
        Trainer.from_params(PARAMS, tiny_overrides(tmp_path / "x"), env=other).train()
    except ValueError as exc:
        assert "accepted: SAME_STEP" in str(exc)
    else:
        raise AssertionError("a NEXT_STEP vector env was accepted")


def test_a_linear_rnd_weight_decays_from_the_first_iteration(tmp_path):
    # The schedules know the run's length before the first advantage: 4 iterations × 128 steps, so the
    # weight falls linearly from 1 to 0 over 512 env steps, read at 0, 128, 256, 384 steps collected.
    rnd = '{"hidden_sizes": [8], "weight": 1.0, "weight_final": 0.0, "weight_schedule_kind": "linear"}'
    trainer = Trainer.from_params(
        PARAMS, tiny_overrides(tmp_path, f"algorithm.cfg.rnd={rnd}", "store.enabled=false")
    )
    assert [m["advantage/rnd_weight"] for m in trainer] == [1.0, 0.75, 0.5, 0.25]

"""A Minari export loads with ``minari.load_dataset`` and holds the episodes it was given, bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from _dataset_runs import tiny_run

from rlpipe.datasets.episode import Episode
from rlpipe.datasets.episodes import DatasetSource
from rlpipe.datasets.minari_export import check_dataset_id, default_dataset_id, write_minari

minari = pytest.importorskip("minari")


def source_of(
    run_dir: str, env_id: str, gym_id: str | None, observation_space: gym.Space, action_space: gym.Space
) -> DatasetSource:
    """A run's description as the writer reads it (no images named: Minari keeps every group raw)."""
    return DatasetSource(
        run_dir, env_id, gym_id, observation_space, action_space, (), {}, (), None, "abc123", (1, 2), None
    )


def _episode(
    rng: np.random.Generator,
    length: int,
    obs: Any,
    act: tuple[int, ...] | None,
    ended: str,
    success: bool = False,
) -> Episode:
    def draw(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        if dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        return rng.standard_normal(shape).astype(dtype)

    if isinstance(obs, dict):
        steps = {k: draw((length, *s), d) for k, (s, d) in obs.items()}
        final = {k: draw(s, d) for k, (s, d) in obs.items()}
    else:
        steps, final = draw((length, *obs), np.float32), draw(obs, np.float32)
    flags = {"terminated": np.zeros(length, bool), "truncated": np.zeros(length, bool)}
    flags[ended][-1] = True
    actions = rng.integers(0, 2, length) if act is None else draw((length, *act), np.float32)
    return Episode(
        0,
        0,
        0,
        steps,
        final,
        actions,
        draw((length,), np.float32),
        flags["terminated"],
        flags["truncated"],
        (np.arange(length) == length - 1) & success if success else None,
        np.full(length, 3, np.int64),
        draw((length,), np.float32),
        draw((length,), np.float32),
        cut=False,
    )


def _load(root: Path, dataset_id: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return minari.load_dataset(dataset_id)


def test_a_flat_cartpole_export_loads_with_minari_equal_bit_for_bit(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    episodes = [
        _episode(rng, n, (4,), None, ended)
        for n, ended in [(5, "terminated"), (1, "truncated"), (9, "terminated")]
    ]
    cartpole = gym.make("CartPole-v1")
    source = source_of(
        "data/cartpole", "CartPole-v1", "CartPole-v1", cartpole.observation_space, cartpole.action_space
    )
    seen = []
    folder = write_minari(iter(episodes), source, tmp_path, "rlpipe/cartpole/rollouts-v0", seen.append)
    assert folder == tmp_path / "rlpipe/cartpole/rollouts-v0" and (folder / "data/main_data.hdf5").is_file()
    assert len(seen) == 3

    dataset = _load(tmp_path, "rlpipe/cartpole/rollouts-v0", monkeypatch)
    assert (dataset.total_episodes, dataset.total_steps) == (3, 15)
    assert dataset.spec.env_spec.id == "CartPole-v1"  # offline-RL tools rebuild the env from it
    assert dataset.recover_environment().spec.id == "CartPole-v1"
    for mine, theirs in zip(episodes, dataset.iterate_episodes(), strict=True):
        np.testing.assert_array_equal(
            theirs.observations, np.concatenate([mine.observations, mine.next_observation[None]])
        )
        assert theirs.observations.dtype == np.float32 and theirs.actions.dtype == mine.actions.dtype
        for field, ours in [
            ("actions", mine.actions),
            ("rewards", mine.rewards),
            ("terminations", mine.terminated),
            ("truncations", mine.truncated),
        ]:
            np.testing.assert_array_equal(getattr(theirs, field), ours, err_msg=field)
        infos = [
            ("log_prob", mine.log_probs, np.nan),
            ("value", mine.values, np.nan),
            ("iteration", mine.iterations, mine.iterations[-1]),
        ]
        for key, ours, last in infos:  # [L+1], entry t with observation t: the final one took no action
            np.testing.assert_array_equal(theirs.infos[key], np.append(ours, last), err_msg=key)
            assert theirs.infos[key].dtype == ours.dtype
        assert "success" not in theirs.infos


def test_observation_groups_and_raw_images_keep_their_bytes(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    groups = {"policy": ((6,), np.float32), "camera": ((3, 64, 64), np.uint8)}
    space = gym.spaces.Dict(
        {
            "policy": gym.spaces.Box(-np.inf, np.inf, (6,), np.float32),
            "camera": gym.spaces.Box(0, 255, (3, 64, 64), np.uint8),
        }
    )
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    episodes = [_episode(rng, n, groups, (2,), "terminated", success=True) for n in (4, 7)]
    source = source_of("data/push", "PushCube", None, space, action_space)
    write_minari(episodes, source, tmp_path, "rlpipe/push/rollouts-v0")

    dataset = _load(tmp_path, "rlpipe/push/rollouts-v0", monkeypatch)
    assert dataset.spec.env_spec is None  # no gymnasium id: the spaces alone
    assert dataset.observation_space == space and dataset.action_space == action_space
    for mine, theirs in zip(episodes, dataset.iterate_episodes(), strict=True):
        for group in groups:  # images raw: no JPEG, every byte as given
            expected = np.concatenate([mine.observations[group], mine.next_observation[group][None]])
            assert theirs.observations[group].dtype == expected.dtype
            np.testing.assert_array_equal(theirs.observations[group], expected)
        np.testing.assert_array_equal(theirs.actions, mine.actions)
        np.testing.assert_array_equal(theirs.infos["success"], np.append(False, mine.success))


@pytest.mark.parametrize("bad", ["no-version", "rlpipe/x/", "a b-v0", "rlpipe//x-v0", "x-v"])
def test_a_dataset_id_minari_refuses_names_the_option(bad):
    with pytest.raises(ValueError, match=r"^--dataset-id: .* expected \(namespace/\)name-vN"):
        check_dataset_id(bad)


def test_the_default_id_is_valid_for_any_run_folder_name():
    assert default_dataset_id("data/cart pole.v2/") == "rlpipe/cart_pole_v2/rollouts-v0"
    assert check_dataset_id(default_dataset_id("s3://bucket/runs/exp-1")) == "rlpipe/exp-1/rollouts-v0"


# --- a real run, end to end: the CLI's Minari export against an independent read of the stores -------

STEP_KEYS = ("obs", "action", "reward", "terminated", "truncated")


def independent_episodes(run: Path, action_key: str = "action") -> tuple[list[dict[str, np.ndarray]], int]:
    """Whole episodes of a single-process flat-obs run, read with zarr alone: ``(episodes, fragments)``.

    ``action_key``: the store array the actions come from (``action``, or ``action_mean``).

    Per env: stores in iteration order, slots 0..T-1, an episode ends at each done (its final
    observation from ``final_obs`` at that slot); a store whose ``reset_at_start`` is set drops the
    episode in progress, as does the end of the last store.
    """
    import zarr

    stores = [zarr.open_group(str(p), mode="r") for p in sorted((run / "rollouts").glob("iter-*.zarr"))]
    episodes: list[dict[str, np.ndarray]] = []
    fragments = 0
    for env in range(stores[0]["obs"].shape[0]):
        steps: list[tuple] = []
        for store in stores:
            if store.attrs["reset_at_start"] and steps:
                fragments, steps = fragments + 1, []
            arrays = {k: store[k][env] for k in (*STEP_KEYS, "done")} | {"action": store[action_key][env]}
            index, final = store["final_obs/index"][:], store["final_obs/obs"][:]
            finals = dict(zip(map(tuple, index), final, strict=True))
            for t in range(arrays["obs"].shape[0] - 1):
                steps.append(tuple(arrays[k][t] for k in STEP_KEYS))
                if arrays["done"][t]:
                    obs, action, reward, terminated, truncated = map(np.stack, zip(*steps, strict=True))
                    episodes.append(
                        {
                            "observations": np.concatenate([obs, finals[(env, t)][None]]),
                            "actions": action,
                            "rewards": reward,
                            "terminations": terminated,
                            "truncations": truncated,
                        }
                    )
                    steps = []
        fragments += bool(steps)
    return episodes, fragments


def test_a_cartpole_run_exported_by_the_cli_equals_its_stores_bit_for_bit(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from rlpipe.cli import cli

    run = tiny_run(tmp_path / "data")
    out = tmp_path / "minari"
    result = CliRunner().invoke(cli, ["dataset", str(run), "--format", "minari", "--out", str(out)])
    assert result.exit_code == 0, result.output
    expected, fragments = independent_episodes(run)
    assert len(expected) >= 3 and fragments >= 1  # CartPole episodes end inside and across the stores
    frames = sum(len(e["rewards"]) for e in expected)
    assert result.output.startswith(
        f"dataset → {out}: {len(expected)} episodes, {frames} frames, "
        f"{fragments} fragments dropped, 0 episodes filtered out, "
    )

    dataset = _load(out, "rlpipe/cartpole_ppo/rollouts-v0", monkeypatch)
    assert dataset.total_episodes == len(expected) and dataset.total_steps == frames
    assert dataset.spec.env_spec is None or dataset.spec.env_spec.id == "CartPole-v1"
    for ours, theirs in zip(expected, dataset.iterate_episodes(), strict=True):
        for field, values in ours.items():
            stored = getattr(theirs, field)
            assert stored.dtype == values.dtype, field
            np.testing.assert_array_equal(stored, values, err_msg=field)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_an_export_with_action_mean_holds_the_recorded_deterministic_actions(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from rlpipe.cli import cli

    run = tiny_run(tmp_path / "data", "store.action_mean=true", "store.envs=2", "trainer.iterations=2")
    out = tmp_path / "minari"
    result = CliRunner().invoke(
        cli, ["dataset", str(run), "--format", "minari", "--out", str(out), "--action", "mean"]
    )
    assert result.exit_code == 0, result.output
    expected, _ = independent_episodes(run, action_key="action_mean")
    executed, _ = independent_episodes(run)
    assert expected and any(
        not np.array_equal(m["actions"], e["actions"]) for m, e in zip(expected, executed, strict=True)
    )
    dataset = _load(out, "rlpipe/cartpole_ppo/rollouts-v0", monkeypatch)
    assert dataset.total_episodes == len(expected)
    for ours, theirs in zip(expected, dataset.iterate_episodes(), strict=True):
        assert theirs.actions.dtype == ours["actions"].dtype
        np.testing.assert_array_equal(theirs.actions, ours["actions"])
        np.testing.assert_array_equal(theirs.observations, ours["observations"])

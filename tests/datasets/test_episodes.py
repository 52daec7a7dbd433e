"""Stored rollouts as episodes (rlpipe/datasets/episodes.py) against an independent read of the stores."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr
from _offline_fixtures import PARAMS, tiny_overrides

from rlpipe.artifacts.errors import StoreError
from rlpipe.config import ConfigError
from rlpipe.datasets import Selection, Summary, open_source, read_episodes
from rlpipe.envs import CartPole, build_env
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


class SuccessCartPole(CartPole):
    """CartPole whose ``info["success"]`` is ``cart position > 0`` (an env that reports success)."""

    def step(self, action):
        step = super().step(action)
        return step._replace(info={**step.info, "success": step.final_obs[:, 0] > 0})


def _train(data_dir: Path, *extra: str, params: Path = PARAMS, env=None) -> Path:
    Trainer.from_params(params, tiny_overrides(data_dir, *extra), env=env).train()
    return next(p.parent for p in data_dir.rglob("params.yaml") if (p.parent / "rollouts").is_dir())


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory) -> Path:
    """4 stores of 8 CartPole envs × 16 steps, episodes capped at 12 steps (time limits)."""
    return _train(tmp_path_factory.mktemp("ppo"), "env.cfg.max_episode_steps=12")


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory) -> Path:
    """GRPO (shared group resets before every rollout), tiny."""
    data_dir = tmp_path_factory.mktemp("grpo")
    overrides = [item for item in tiny_overrides(data_dir) if not item.startswith("policy.critic")]
    grpo = ROOT / "configs" / "grpo_cartpole.yaml"
    Trainer.from_params(grpo, [*overrides, "trainer.buffer_size=24"]).train()
    return next(p.parent for p in data_dir.rglob("params.yaml") if (p.parent / "rollouts").is_dir())


# ------------------------------------------------------------------------------ the independent read


def _stores(run: Path) -> list[tuple[int, zarr.Group]]:
    paths = sorted((run / "rollouts").glob("iter-*.zarr"))
    return [(int(p.name[5:11]), zarr.open_group(str(p), mode="r")) for p in paths]


def independent_episodes(run: Path, keep_last: bool = False) -> tuple[list[dict], int]:
    """Episodes by a plain step loop over the raw Zarr arrays; and the dropped fragments."""
    stores = _stores(run)
    n = stores[0][1]["reward"].shape[0]
    out, dropped = [], 0
    for env in range(n):
        steps, known = [], False
        for it, g in stores:
            a = {k: np.asarray(g[k][...]) for k in ("obs", "action", "reward", "terminated", "truncated")}
            finals = {
                tuple(ij): row
                for ij, row in zip(
                    np.asarray(g["final_obs/index"][...]).tolist(), np.asarray(g["final_obs/obs"][...])
                )
            }
            if g.attrs["reset_at_start"]:
                dropped += bool(steps)
                steps, known = [], True
            for t in range(a["reward"].shape[1] - 1):
                steps.append(
                    (
                        it,
                        a["obs"][env, t],
                        a["action"][env, t],
                        a["reward"][env, t],
                        a["terminated"][env, t],
                        a["truncated"][env, t],
                    )
                )
                if a["terminated"][env, t] or a["truncated"][env, t]:
                    if known:
                        out.append({"env": env, "steps": steps, "next": finals[(env, t)], "cut": False})
                    else:
                        dropped += 1
                    steps, known = [], True
        if steps and known and keep_last:
            out.append({"env": env, "steps": steps, "next": a["obs"][env, -1], "cut": True})
        elif steps:
            dropped += 1
    return out, dropped


def _assert_equal(episodes, expected) -> None:
    assert len(episodes) == len(expected) > 0
    for e, x in zip(episodes, expected, strict=True):
        its, obs, act, rew, term, trunc = (np.array(c) for c in zip(*x["steps"]))
        assert (e.env, e.length, e.cut) == (x["env"], len(rew), x["cut"])
        assert np.array_equal(e.iterations, its) and np.array_equal(e.observations, obs)
        assert np.array_equal(e.actions, act) and np.array_equal(e.rewards, rew)
        if e.cut:
            trunc[-1] = True
        assert np.array_equal(e.terminated, term) and np.array_equal(e.truncated, trunc)
        assert np.array_equal(e.next_observation, x["next"])
        assert not (e.terminated[:-1].any() or e.truncated[:-1].any())
        assert e.terminated[-1] or e.truncated[-1]


@pytest.mark.parametrize("keep_last", [False, True])
def test_episodes_equal_an_independent_read_of_the_stores(ppo_run, keep_last):
    summary = Summary()
    episodes = list(read_episodes(ppo_run, Selection(keep_last_fragment=keep_last), summary))
    expected, dropped = independent_episodes(ppo_run, keep_last)
    _assert_equal(episodes, expected)
    assert [e.index for e in episodes] == list(range(len(episodes)))
    assert (summary.episodes, summary.dropped_fragments) == (len(episodes), dropped)
    assert summary.frames == sum(e.length for e in episodes)
    assert any(e.iterations[0] != e.iterations[-1] for e in episodes)  # some span two stores
    assert any(e.truncated[-1] and not e.cut for e in episodes)  # time limits, with their true final obs


def test_a_kept_fragment_ends_with_the_bootstrap_observation(ppo_run):
    cut = [e for e in read_episodes(ppo_run, Selection(keep_last_fragment=True)) if e.cut]
    last = zarr.open_group(str(sorted((ppo_run / "rollouts").glob("iter-*.zarr"))[-1]), mode="r")
    assert len(cut) == 8  # one per env
    for e in cut:
        assert np.array_equal(e.next_observation, np.asarray(last["obs"][e.env, -1]))
        assert e.truncated[-1] and not e.terminated[-1]


def test_the_collector_records_reset_at_start_only_where_it_reset(ppo_run, grpo_run, tmp_path):
    assert [g.attrs["reset_at_start"] for _, g in _stores(ppo_run)] == [True, False, False, False]
    assert all(g.attrs["reset_at_start"] for _, g in _stores(grpo_run))
    periodic = _train(tmp_path, "trainer.horizons_per_env_reset=2")
    assert [g.attrs["reset_at_start"] for _, g in _stores(periodic)] == [True, False, True, False]
    summary = Summary()
    episodes = list(read_episodes(periodic, Selection(), summary))
    _assert_equal(episodes, independent_episodes(periodic)[0])
    assert not any(e.iterations[0] == 2 and e.iterations[-1] == 3 for e in episodes)  # a reset cuts


def test_grpo_group_resets_break_continuity(grpo_run):
    summary = Summary()
    episodes = list(read_episodes(grpo_run, Selection(), summary))
    expected, dropped = independent_episodes(grpo_run)
    _assert_equal(episodes, expected)
    assert all(e.iterations[0] == e.iterations[-1] for e in episodes)  # never across a store
    assert summary.dropped_fragments == dropped


# ------------------------------------------------------------------------------ selection


def test_selection_of_iterations_last_and_envs(ppo_run):
    assert open_source(ppo_run, Selection(iterations=(2, 3))).iterations == (2, 3)
    assert open_source(ppo_run, Selection(last=2)).iterations == (3, 4)
    episodes = list(read_episodes(ppo_run, Selection(iterations=(2, 3), envs=(1, 5))))
    assert {e.env for e in episodes} == {1, 5}
    assert all(2 <= it <= 3 for e in episodes for it in e.iterations)
    everything = [e for e in read_episodes(ppo_run, Selection()) if e.env in (1, 5) and e.iteration >= 2]
    inside = [e for e in everything if e.iterations[-1] <= 3]
    # an episode that began in iteration 2 is the same whether iteration 1 is read or not
    assert [(e.env, e.iteration, e.length) for e in episodes] == [
        (e.env, e.iteration, e.length) for e in inside
    ]


def test_min_return_filters_and_counts(ppo_run):
    summary = Summary()
    every = list(read_episodes(ppo_run, Selection()))
    median = float(np.median([e.episode_return for e in every]))
    kept = list(read_episodes(ppo_run, Selection(min_return=median), summary))
    assert all(e.episode_return >= median for e in kept) and kept
    assert summary.dropped_by_filter == len(every) - len(kept) > 0


def test_success_is_stored_per_step_and_filters(tmp_path):
    run = _train(tmp_path, env=SuccessCartPole(8, "cpu", max_episode_steps=12))
    stored = zarr.open_group(str(run / "rollouts" / "iter-000001.zarr"), mode="r")
    assert stored["success"].dtype == bool and stored["success"].shape == stored["reward"].shape
    episodes = list(read_episodes(run, Selection()))
    assert all(e.success is not None and len(e.success) == e.length for e in episodes)
    winners = list(read_episodes(run, Selection(min_success=True)))
    assert 0 < len(winners) < len(episodes) and all(e.succeeded for e in winners)


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        (Selection(iterations=(1, 2), last=1), "--iterations and --last"),
        (Selection(iterations=(3, 2)), "--iterations 3:2"),
        (
            Selection(iterations=(7, 9)),
            "--iterations 7:9: not stored: 7–9 (deleted by store.keep_last, "
            "skipped by store.every, or not run yet); stored: 1–4",
        ),
        (Selection(iterations=(3, 6)), "--iterations 3:6: not stored: 5–6 ("),
        (Selection(last=0), "--last 0"),
        (Selection(action="greedy"), "--action greedy: accepted executed | mean"),
        (Selection(envs=(8,)), "--envs 8: the stores hold envs 0–7"),
        (Selection(min_success=True), "--min-success"),
    ],
)
def test_bad_selections_are_one_line(ppo_run, selection, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        list(read_episodes(ppo_run, selection))
    assert "\n" not in str(info.value)


def test_action_mean_without_a_stored_mean_is_refused(ppo_run):
    with pytest.raises(ConfigError, match="--action mean: .*stores no action_mean .*store.action_mean: true"):
        list(read_episodes(ppo_run, Selection(action="mean")))


def test_a_gap_and_a_run_without_stores_are_refused(ppo_run, tmp_path):
    gap = tmp_path / "gap"
    shutil.copytree(ppo_run, gap)
    shutil.rmtree(gap / "rollouts" / "iter-000002.zarr")
    with pytest.raises(StoreError, match="iter-000003.zarr: iteration 2 before it is not stored"):
        open_source(gap, Selection())
    assert open_source(gap, Selection(iterations=(3, 4))).iterations == (3, 4)
    wider = tmp_path / "wider"
    shutil.copytree(gap, wider)
    shutil.rmtree(wider / "rollouts" / "iter-000003.zarr")
    with pytest.raises(StoreError, match="iter-000004.zarr: iterations 2–3 before it are not stored"):
        open_source(wider, Selection())
    for store in (gap / "rollouts").glob("iter-*"):
        shutil.rmtree(store)
    with pytest.raises(StoreError, match="no rollout stores"):
        open_source(gap, Selection())


# ------------------------------------------------------------------------------ old stores


def _make_old(run: Path, target: Path) -> Path:
    """A copy of ``run`` as an rlpipe without reset_at_start and final_obs would have written it."""
    shutil.copytree(run, target)
    for store in (target / "rollouts").glob("iter-*.zarr"):
        meta = json.loads((store / "zarr.json").read_text())
        meta["attributes"].pop("reset_at_start")
        (store / "zarr.json").write_text(json.dumps(meta, indent=2))
        shutil.rmtree(store / "final_obs")
    return target


def test_old_stores_read_as_before_and_episodes_say_what_is_missing(ppo_run, grpo_run, tmp_path):
    from rlpipe.artifacts.zarr_read import read_rollout

    old = _make_old(ppo_run, tmp_path / "old")
    rollout, attrs = read_rollout(old / "rollouts" / "iter-000002.zarr")  # replay's read: unchanged
    assert "reset_at_start" not in attrs and torch.equal(
        rollout["obs"], read_rollout(ppo_run / "rollouts" / "iter-000002.zarr")[0]["obs"]
    )
    with pytest.raises(StoreError, match="iter-000001.zarr: written before rlpipe stored final observations"):
        list(read_episodes(old, Selection()))
    old_grpo = _make_old(grpo_run, tmp_path / "old_grpo")
    with pytest.raises(StoreError, match="iter-000002.zarr: written before rlpipe recorded reset_at_start"):
        open_source(old_grpo, Selection())


def test_fps_comes_from_the_control_step(ppo_run):
    source = open_source(ppo_run, Selection())
    assert source.fps == 50 and source.gym_id is None  # CartPole: tau = 0.02 s; rlpipe's torch env
    assert source.observation_space.shape == (4,) and source.action_space.n == 2


def test_sharded_iterations_give_one_stream_per_rank_and_env(ppo_run, tmp_path):
    sharded = tmp_path / "sharded"
    shutil.copytree(ppo_run, sharded)
    for store in sorted((sharded / "rollouts").glob("iter-*.zarr")):
        ranks = store.with_name(store.name + ".shards")
        for rank in (0, 1):  # both ranks hold the same rollout, so rank 1 repeats rank 0's episodes
            shutil.copytree(store, ranks / f"rank-{rank}")
        shutil.rmtree(store)
        ranks.rename(store)
    single = list(read_episodes(ppo_run, Selection()))
    episodes = list(read_episodes(sharded, Selection()))
    assert [(e.rank, e.env, e.length) for e in episodes] == [
        (rank, e.env, e.length) for rank in (0, 1) for e in single
    ]
    assert [e.index for e in episodes] == list(range(2 * len(single)))


def test_frame_channels_are_the_envs_own_not_a_guess():
    from rlpipe.datasets.episodes import _frame_channels

    env = build_env("PixelCartPole", 2, "cpu", {"frame_stack": 3})
    assert env.frame_channels == {"pixels": 1}  # 3 grayscale frames, not one RGB frame
    space = env.observation_space
    assert _frame_channels("pixels", space, {"frame_channels": dict(env.frame_channels)}) == 1
    assert _frame_channels("pixels", space, {}) == 3  # stores without the attribute: RGB where it divides

"""Stored rollouts as episodes: one stream per (rank, env), split after each done, exactly.

A run's stores are ``[N, T+1]`` rollouts (:mod:`rlpipe.rollout`); an episode may begin in one store
and end in a later one. Each stream (one env of one rank's shard) is read in iteration order, slots
``0..T-1``, and split after each done (``terminated`` and ``truncated`` kept apart). An episode
continues into the next store only where that store's ``reset_at_start`` attribute says the
collector did not reset the envs before its first step. The observation after an episode's last
action is the true final observation the collector stored at the done slot (``final_obs``).

Fragments whose start is not in the selection (before the first exported store, unless it began
with a reset) are dropped; so is one cut by a recorded reset; the one cut by the last store is
dropped too unless ``keep_last_fragment``, which keeps it as truncated with the store's bootstrap
observation ``obs[:, T]`` as its next observation. :class:`Summary` counts what was dropped.

Stores written before these facts were recorded: without ``reset_at_start``, iteration 1 began
with a reset (the collector's first call always resets) and a later store continues the previous
one, unless the run's params reset envs between rollouts (``reset_every_rollout``,
``horizons_per_env_reset``), which is refused in one line; without ``final_obs``, an ended
episode has no true final observation, which is refused in one line naming the store.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.shards import is_sharded, read_any_attrs, shard_paths
from rlpipe.config import ConfigError, describing, load
from rlpipe.datasets.episode import Episode, Obs
from rlpipe.datasets.indices import EnvIndices
from rlpipe.datasets.streams import StoreData, StreamCutter, read_store
from rlpipe.envs import space_from_dict
from rlpipe.rollout import RESET_AT_START

__all__ = [
    "FIDELITY_KEY",
    "DatasetSource",
    "Episode",
    "Obs",
    "Selection",
    "Summary",
    "open_source",
    "read_episodes",
]

ACTIONS = ("executed", "mean")
FIDELITY_KEY = "rlpipe_store"
"""The key of :meth:`DatasetSource.fidelity` in a dataset's metadata (Minari's; LeRobot's info.json)."""


@dataclass(frozen=True)
class Selection:
    """Which stored iterations, envs and episodes to export, and which action."""

    iterations: tuple[int, int] | None = None
    """Inclusive ``A:B`` of stored iterations."""
    last: int | None = None
    """The last K stored iterations (exclusive with ``iterations``)."""
    envs: EnvIndices | None = None
    """Env indices (per rank) to export, as spans (a tuple of indices is taken too); ``None``: every env."""
    min_return: float | None = None
    min_success: bool = False
    """Keep only episodes that succeeded."""
    action: str = "executed"
    """``executed`` (the sampled action, which the rewards followed) or ``mean`` (the policy mean)."""
    keep_last_fragment: bool = False
    """Keep the fragment cut by the last store, as truncated."""

    def __post_init__(self) -> None:
        if self.envs is not None and not isinstance(self.envs, EnvIndices):
            try:
                envs = EnvIndices.of(self.envs)
            except (TypeError, ValueError):
                raise ConfigError(f"--envs {self.envs}: accepted env indices >= 0") from None
            object.__setattr__(self, "envs", envs)


@dataclass(frozen=True)
class DatasetSource:
    """What a dataset writer needs to know about the run behind the episodes."""

    run_dir: str
    env_id: str
    gym_id: str | None
    observation_space: gym.Space
    action_space: gym.Space
    image_groups: tuple[str, ...]
    frame_channels: dict[str, int]
    privileged_groups: tuple[str, ...]
    fps: int | None
    params_hash: str
    iterations: tuple[int, ...]
    checkpoint: str | None
    stores: dict[int, AnyPath] = field(default_factory=dict, repr=False, compare=False)
    """``{iteration: store or sharded iteration folder}`` of the selection."""
    attrs: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    """``{iteration: attributes}`` of the selection (rank 0's of a sharded one)."""

    def fidelity(self) -> dict[str, Any]:
        """What the selected stores keep of the run's data, for the dataset's own metadata.

        ``complete``: every env of each rank (else ``stored_envs`` of ``num_envs``: ``store.envs``);
        ``exact``: the values the run saw (else ``precision`` names the observation arrays stored in
        a narrower dtype: ``store.precision``). Stores written before these facts were recorded are
        complete and exact.
        """
        attrs = [self.attrs[k] for k in sorted(self.attrs)]
        precision = {name: dtype for a in attrs for name, dtype in dict(a.get("precision") or {}).items()}
        newest = attrs[-1] if attrs else {}
        return {
            "complete": all(a.get("complete", True) is not False for a in attrs),
            "stored_envs": newest.get("stored_envs", newest.get("num_envs")),
            "num_envs": newest.get("num_envs"),
            "exact": all(a.get("exact", True) is not False for a in attrs),
            "precision": precision,
        }

    def image_shape(self, group: str) -> tuple[int, ...]:
        """``(C, H, W)`` of the image group ``group`` (a Box of the Dict observation space)."""
        space = self.observation_space
        assert isinstance(space, gym.spaces.Dict)  # image groups are groups of a Dict space
        shape = space[group].shape
        assert shape is not None
        return shape


@dataclass
class Summary:
    """Counts of an export (the writer/CLI fills ``bytes``)."""

    episodes: int = 0
    frames: int = 0
    dropped_fragments: int = 0
    dropped_by_filter: int = 0
    bytes: int = 0


def open_source(run_dir: str | AnyPath, selection: Selection) -> DatasetSource:
    """The run's facts for ``selection``; a one-line ``ConfigError``/``StoreError`` where it cannot be.

    Refused: a bad selection (both ``iterations`` and ``last``, a reversed range, a range reaching
    iterations that are not stored, an unknown ``action``, envs that were not stored), a run without
    stores, a selection with a gap (``store.keep_last``, ``store.every``), stores holding different
    env subsets. ``last`` K means the last K stored iterations (fewer where fewer are stored).
    """
    _check_selection(selection)
    layout = RunLayout(as_path(run_dir))
    if not layout.params.is_file():
        raise StoreError(f"{layout.root}: not an rlpipe run directory (no {layout.params.name})")
    with describing():  # reads the run's stores: runs none of its code (a plug-in algorithm)
        cfg = load(layout.params)
    stores = layout.rollout_paths()
    if not stores:
        raise StoreError(
            f"{layout.rollouts}: no rollout stores (store.enabled was false, or none was written yet)"
        )
    chosen = _chosen_iterations(sorted(stores), selection)
    _refuse_gaps(chosen, stores)
    attrs = {k: read_any_attrs(stores[k]) for k in chosen}
    _refuse_mixed_envs(attrs, stores, selection)
    _refuse_unknown_resets(attrs, stores, cfg)
    newest = attrs[chosen[-1]]
    spaces = newest.get("spaces") or {}
    if "observation" not in spaces or "action" not in spaces:
        raise StoreError(f"{stores[chosen[-1]]}: records no observation/action spaces; it cannot be exported")
    obs_space, act_space = space_from_dict(spaces["observation"]), space_from_dict(spaces["action"])
    images = _image_groups(obs_space)
    return DatasetSource(
        run_dir=str(run_dir),
        env_id=cfg.env.id,
        gym_id=_gym_id(cfg.env.id, newest),
        observation_space=obs_space,
        action_space=act_space,
        image_groups=images,
        frame_channels={g: _frame_channels(g, obs_space, newest) for g in images},
        privileged_groups=_privileged(newest),
        fps=fps_of(newest.get("control_dt")),
        params_hash=str(newest.get("params_hash", "")),
        iterations=tuple(chosen),
        checkpoint=newest.get("checkpoint"),
        stores={k: stores[k] for k in chosen},
        attrs=attrs,
    )


def read_episodes(
    run_dir: str | AnyPath, selection: Selection, summary: Summary | None = None
) -> Iterator[Episode]:
    """Episodes of ``selection`` in deterministic order (see the module docstring); fills ``summary``.

    Streams in ascending ``(rank, env)``; within a stream, episodes in time order. Each rank's
    selected stores are read once (the selected envs' rows kept in memory).
    """
    summary = summary if summary is not None else Summary()
    source = open_source(run_dir, selection)
    index = 0
    for rank, data in _ranks(source, selection):
        untracked = next((d.path for d in data if d.success is None), None)
        if selection.min_success and untracked is not None:
            raise ConfigError(
                f"--min-success: {untracked} holds no per-step success (the env does not "
                "report info['success']); accepted only for envs that do"
            )
        envs = selection.envs if selection.envs is not None else range(data[0].num_envs)
        for env in envs:
            cutter = StreamCutter(data, env, rank, selection.keep_last_fragment)
            for episode in cutter.episodes():
                if not _passes(episode, selection):
                    summary.dropped_by_filter += 1
                    continue
                summary.episodes += 1
                summary.frames += episode.length
                yield replace(episode, index=index)
                index += 1
            summary.dropped_fragments += cutter.dropped


def fps_of(control_dt: Any) -> int | None:
    """The integer control rate of a control period in seconds; ``None`` when unknown or not whole."""
    if not isinstance(control_dt, int | float) or isinstance(control_dt, bool) or not control_dt > 0:
        return None
    rate = 1.0 / control_dt
    return round(rate) if abs(rate - round(rate)) < 1e-6 * rate else None


def _check_selection(selection: Selection) -> None:
    if selection.iterations is not None and selection.last is not None:
        raise ConfigError("--iterations and --last: give one of them, not both")
    if selection.iterations is not None:
        a, b = selection.iterations
        if a > b or a < 1:
            raise ConfigError(f"--iterations {a}:{b}: accepted A:B with 1 <= A <= B (stored iterations)")
    if selection.last is not None and selection.last < 1:
        raise ConfigError(f"--last {selection.last}: accepted a number of stored iterations >= 1")
    if selection.action not in ACTIONS:
        raise ConfigError(f"--action {selection.action}: accepted {' | '.join(ACTIONS)}")


def _chosen_iterations(stored: list[int], selection: Selection) -> list[int]:
    if selection.iterations is not None:
        a, b = selection.iterations
        chosen = [k for k in stored if a <= k <= b]
        missing = _missing_spans(a, b, chosen)
        if missing:
            raise ConfigError(
                f"--iterations {a}:{b}: not stored: {missing} (deleted by store.keep_last, "
                f"skipped by store.every, or not run yet); stored: {_ranges(stored)}"
            )
        return chosen
    if selection.last is not None:
        return stored[-selection.last :]
    return stored


def _refuse_gaps(chosen: list[int], stores: dict[int, AnyPath]) -> None:
    for before, after in zip(chosen, chosen[1:]):
        if after != before + 1:
            gap = (
                f"iteration {before + 1} before it is"
                if after == before + 2
                else f"iterations {before + 1}–{after - 1} before it are"
            )
            raise StoreError(
                f"{stores[after]}: {gap} not stored (store.keep_last or store.every), so episodes "
                "cannot be followed across the gap; select a range without gaps (--iterations A:B)"
            )


def _refuse_mixed_envs(
    attrs: dict[int, dict[str, Any]], stores: dict[int, AnyPath], selection: Selection
) -> None:
    first = min(attrs)
    stored = attrs[first].get("stored_envs", attrs[first].get("num_envs"))
    for k, a in attrs.items():
        here = a.get("stored_envs", a.get("num_envs"))
        if here != stored:
            raise StoreError(
                f"{stores[k]}: holds {here} envs per rank, iteration {first} holds {stored} "
                "(store.envs changed); select stores of one env subset"
            )
    if selection.envs is not None and stored is not None and selection.envs.last >= stored:
        raise ConfigError(f"--envs {selection.envs}: the stores hold envs 0–{stored - 1} of each rank")


def _refuse_unknown_resets(attrs: dict[int, dict[str, Any]], stores: dict[int, AnyPath], cfg: Any) -> None:
    """Old stores (no ``reset_at_start``): refused only where the run could have reset between rollouts."""
    resets = (
        bool(getattr(cfg.algorithm.cfg, "reset_every_rollout", False))
        or cfg.trainer.horizons_per_env_reset > 0
    )
    for k in sorted(attrs)[1:]:
        if RESET_AT_START not in attrs[k] and resets:
            raise StoreError(
                f"{stores[k]}: written before rlpipe recorded {RESET_AT_START}, and this run "
                "resets envs between rollouts (reset_every_rollout / "
                "trainer.horizons_per_env_reset), so whether episodes continue into it is "
                "unknown; select stores written since"
            )


def _ranks(source: DatasetSource, selection: Selection) -> Iterator[tuple[int, list[StoreData]]]:
    """Per rank, in rank order: its selected stores read (the selected envs' rows)."""
    first = source.stores[source.iterations[0]]
    world = len(shard_paths(first)) if is_sharded(first) else 1
    for rank in range(world):
        data = []
        for k in source.iterations:
            path = source.stores[k]
            store = shard_paths(path)[rank] if is_sharded(path) else path
            data.append(read_store(store, k, source.attrs[k], selection.action))
        yield rank, data


def _passes(episode: Episode, selection: Selection) -> bool:
    if selection.min_return is not None and episode.episode_return < selection.min_return:
        return False
    return not selection.min_success or bool(episode.succeeded)


def _image_groups(space: gym.Space) -> tuple[str, ...]:
    if not isinstance(space, gym.spaces.Dict):
        return ()
    return tuple(k for k, s in space.spaces.items() if s.dtype == np.uint8 and len(s.shape or ()) == 3)


def _frame_channels(group: str, space: gym.Space, attrs: dict[str, Any]) -> int:
    """Channels of one frame of an image group: as recorded (``frame_channels``), else 3 where they divide."""
    recorded = attrs.get("frame_channels") or {}
    if group in recorded:
        return int(recorded[group])
    assert isinstance(space, gym.spaces.Dict)  # image groups are groups of a Dict space
    shape = space[group].shape
    assert shape is not None  # an image group is a Box
    channels = shape[0]
    return 3 if channels % 3 == 0 else 1


def _privileged(attrs: dict[str, Any]) -> tuple[str, ...]:
    actor, critic = attrs.get("actor_obs_keys"), attrs.get("critic_obs_keys")
    if not actor or not critic:
        return ()
    return tuple(k for k in critic if k not in actor)


def _gym_id(env_id: str, attrs: dict[str, Any]) -> str | None:
    """``env_id`` where the run's env was gymnasium's own (offline-RL tools rebuild it from the id)."""
    if attrs.get("env_backend") not in {"GymnasiumEnv", "GymnasiumVectorEnv", "EnvpoolEnv"}:
        return None
    return env_id if env_id in gym.registry else None


def _missing_spans(a: int, b: int, chosen: list[int]) -> str:
    """The iterations of ``a..b`` not in ``chosen`` (sorted, inside ``a..b``), as spans; ``""`` if none."""
    spans, start = [], a
    for k in [*chosen, b + 1]:
        if k > start:
            spans.append(f"{start}" if k - 1 == start else f"{start}–{k - 1}")
        start = k + 1
    return ", ".join(spans)


def _ranges(values: list[int]) -> str:
    spans, start = [], values[0]
    for before, after in zip(values, [*values[1:], math.inf]):
        if after != before + 1:
            spans.append(f"{start}" if start == before else f"{start}–{before}")
            start = after
    return ", ".join(spans)

"""Episodes → a Minari dataset, written by Minari itself (``minari.create_dataset_from_buffers``).

The folder given as ``root`` becomes a Minari datasets folder (what ``MINARI_DATASETS_PATH`` names):
``root/<dataset_id>/data/main_data.hdf5`` and ``metadata.json``, with the namespace metadata
Minari writes beside them. Per episode of ``L`` steps Minari stores (its own layout):

==============  ==================  ===================================================================
Minari field    shape               from the episode
==============  ==================  ===================================================================
observations    ``[L+1, *obs]``     ``observations`` then ``next_observation`` (the true final one, or
                                    the bootstrap observation of a kept cut fragment); per group for
                                    observation groups (a ``Dict`` space)
actions         ``[L, *act]``       ``actions`` (executed, or the policy mean with ``--action mean``)
rewards         ``[L]``             ``rewards``
terminations    ``[L]``             ``terminated``
truncations     ``[L]``             ``truncated``
infos           ``[L+1]`` per key   ``log_prob``, ``value``, ``iteration`` (and ``success`` where the
                                    env reports it), entry ``t`` with observation ``t`` as Minari lays
                                    infos out (see :func:`step_infos`)
==============  ==================  ===================================================================

The dataset's metadata says what the stores kept (``rlpipe_store``: ``complete``, ``stored_envs`` of
``num_envs``, ``exact``, ``precision``; :meth:`DatasetSource.fidelity`), and its description says
it in words where a ``store.envs`` subset or a ``store.precision`` dtype left something out.

Images are stored raw (``jpeg_encoding=False``: lossless, as stored, ``[C, H, W]`` uint8). The env
is recorded by its gymnasium id where the run has one, so offline-RL tools rebuild it with
``dataset.recover_environment()``; an rlpipe-only env is recorded by its spaces alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlpipe.datasets.episodes import FIDELITY_KEY
from rlpipe.extras import MINARI, require, require_all

if TYPE_CHECKING:
    from rlpipe.datasets.episodes import DatasetSource, Episode

__all__ = [
    "DATASET_ID_FORMAT",
    "check_dataset_id",
    "default_dataset_id",
    "episode_buffer",
    "fidelity_words",
    "step_infos",
    "write_minari",
]

DATASET_ID_FORMAT = "(namespace/)name-vN, e.g. rlpipe/cartpole/rollouts-v0"
"""What ``--dataset-id`` accepts: Minari's id syntax with its version required."""
_DATASET_ID = re.compile(r"(?:[-\w][-\w/]*[-\w]/)?[-\w]+-v\d+")


def default_dataset_id(run_dir: str | Path) -> str:
    """``rlpipe/<exp>/rollouts-v0``: the run folder's name, with what Minari's ids refuse as ``_``."""
    exp = re.sub(r"[^-\w]", "_", Path(str(run_dir).rstrip("/")).name) or "run"
    return f"rlpipe/{exp}/rollouts-v0"


def check_dataset_id(dataset_id: str) -> str:
    """``dataset_id`` when Minari accepts it; else a ``ValueError`` naming ``--dataset-id``."""
    if not _DATASET_ID.fullmatch(dataset_id) or "//" in dataset_id:
        raise ValueError(
            f"--dataset-id: {dataset_id!r} is not a Minari dataset id; expected {DATASET_ID_FORMAT}"
        )
    return dataset_id


def _with_final(steps: Any, final: Any) -> Any:
    """``[L, *x]`` and ``[*x]`` → ``[L+1, *x]`` (per group for observation groups)."""
    if isinstance(steps, dict):
        return {key: _with_final(steps[key], final[key]) for key in steps}
    return np.concatenate([np.asarray(steps), np.asarray(final)[None]])


def step_infos(episode: Episode) -> dict[str, np.ndarray]:
    """Per-step infos, ``[L+1]`` each as Minari lays infos out: entry ``t`` belongs to observation ``t``.

    ``log_prob[t]`` and ``value[t]`` are the policy's at observation ``t`` (for action ``t``); the
    final observation took no action and has no stored value: NaN. ``iteration[t]`` is the store step
    ``t`` came from (the final observation: the last step's). ``success[t]`` is what the env reported
    with observation ``t`` (after action ``t-1``; ``False`` at the first).
    """

    def padded(values: np.ndarray, last: object) -> np.ndarray:
        values = np.asarray(values)
        return np.concatenate([values, np.asarray([last], dtype=values.dtype)])

    infos = {
        "log_prob": padded(episode.log_probs, np.nan),
        "value": padded(episode.values, np.nan),
        "iteration": padded(episode.iterations, episode.iterations[-1]),
    }
    if episode.success is not None:
        success = np.asarray(episode.success, dtype=bool)
        infos["success"] = np.concatenate([[False], success])
    return infos


def episode_buffer(episode: Episode) -> Any:
    """One Minari ``EpisodeBuffer`` of ``episode`` (numpy arrays, nothing converted but the stacking)."""
    from minari.data_collector import EpisodeBuffer

    # minari annotates the columns as lists; it stores numpy arrays as they are
    columns: dict[str, Any] = {
        "observations": _with_final(episode.observations, episode.next_observation),
        "actions": np.asarray(episode.actions),
        "rewards": np.asarray(episode.rewards),
        "terminations": np.asarray(episode.terminated),
        "truncations": np.asarray(episode.truncated),
        "infos": step_infos(episode),
    }
    return EpisodeBuffer(**columns)


@contextlib.contextmanager
def _datasets_path(root: Path) -> Iterator[None]:
    """Minari writes under ``MINARI_DATASETS_PATH``: point it at ``root`` while writing, then restore it."""
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def _description(source: DatasetSource) -> str:
    first, last = source.iterations[0], source.iterations[-1]
    return (
        f"rlpipe training rollouts of {source.env_id} (run {source.run_dir}, iterations {first}..{last}, "
        f"params {source.params_hash}); a training policy's episodes: filter by infos/iteration"
        f"{''.join(f'; {part}' for part in fidelity_words(source.fidelity()))}"
    )


def fidelity_words(fidelity: dict[str, Any]) -> list[str]:
    """What a subset or lower-precision store left out, in words (none for complete, exact stores)."""
    words = []
    if not fidelity["complete"]:
        words.append(
            f"only envs 0–{fidelity['stored_envs'] - 1} of the {fidelity['num_envs']} of each rank "
            "(store.envs)"
        )
    if not fidelity["exact"]:
        groups = ", ".join(f"{name} as {dtype}" for name, dtype in fidelity["precision"].items())
        words.append(f"observations stored lower: {groups} (store.precision), not the values the run saw")
    return words


def write_minari(
    episodes: Iterable[Episode],
    source: DatasetSource,
    root: Path,
    dataset_id: str,
    on_episode: Callable[[Episode], None] | None = None,
) -> Path:
    """Write ``episodes`` as Minari dataset ``dataset_id`` under the datasets folder ``root``.

    Episodes stream through one at a time (Minari appends each to its HDF5 file), so memory holds one
    episode. ``on_episode`` is called after each is handed over (progress). Returns the dataset's
    folder ``root/<dataset_id>``. ``source.gym_id`` (when set) is recorded as the env spec.
    """
    require_all(MINARI, "rlpipe dataset --format minari")
    minari = require("minari", "rlpipe dataset --format minari")
    check_dataset_id(dataset_id)

    def buffers() -> Iterator[Any]:
        for episode in episodes:
            yield episode_buffer(episode)
            if on_episode is not None:
                on_episode(episode)

    # Minari joins a relative datasets folder onto itself a second time: hand it an absolute one
    with _datasets_path(Path(root).absolute()), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Minari's advice on unset author / permalink
        dataset = minari.create_dataset_from_buffers(
            dataset_id=dataset_id,
            buffer=buffers(),
            env=source.gym_id,
            observation_space=source.observation_space,
            action_space=source.action_space,
            algorithm_name="rlpipe",
            author="rlpipe",
            description=_description(source),
            jpeg_encoding=False,
        )
        dataset.storage.update_metadata({FIDELITY_KEY: source.fidelity()})
    return root / dataset_id

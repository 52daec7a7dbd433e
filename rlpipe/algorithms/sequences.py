"""The update's rows from a rollout: flat ``[N·T]`` transitions, or ``seq_len`` sequences for truncated BPTT.

A feedforward policy trains on every transition, env-major. A recurrent policy trains on sequences:
the ``[N, T]`` transitions are cut into ``N·T/L`` sequences of ``L = seq_len`` steps (env-major,
each inside one env's time axis). A minibatch is a set of whole sequences; the policy re-runs its
core over each from the state the collector stored at the sequence start
(``rollout["recurrent_state"][:, k·L]``, the batch's ``start_state``) and resets it to zero after
every ``done`` inside the chunk, so gradients flow back to the first step of the sequence and never
across an episode boundary. rl8's ``seq_len`` / ``seqs_per_state_reset`` semantics
(``RecurrentAlgorithmConfig``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from rlpipe.config.algorithms import SequenceCfg, UpdateCfg
from rlpipe.rollout import RECURRENT_STATE, rollout_dims

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = [
    "START_STATE",
    "SequenceCfg",
    "flatten_transitions",
    "minibatch_rows",
    "sequence_batch",
    "update_batch",
]

START_STATE, DONE = "start_state", "done"
"""Sequence batch keys: the core state ``[B, S]`` each sequence starts from, and its ``[B, L]`` dones."""


def flatten_transitions(rollout: TensorDict, keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The valid ``[N, T]`` transitions of ``keys`` flattened to ``[N*T, ...]`` (env-major order)."""
    return {key: rollout.get(key)[:, :-1].reshape(-1, *rollout.get(key).shape[2:]) for key in keys}


def sequence_batch(
    rollout: TensorDict, keys: tuple[str, ...], seq_len: int | None
) -> dict[str, torch.Tensor]:
    """``keys`` and ``done`` as ``[N·T/L, L, ...]`` sequences, plus ``start_state`` ``[N·T/L, S]``.

    Sequence ``i = n·(T/L) + k`` holds env n's steps ``[k·L, (k+1)·L)``.
    """
    n, t = rollout_dims(rollout)
    length = seq_len or t
    per_env = t // length
    batch = {}
    for key in (*keys, DONE):
        value = rollout.get(key)[:, :-1]
        batch[key] = value.reshape(n * per_env, length, *value.shape[2:])
    state = rollout.get(RECURRENT_STATE)[:, 0:t:length]
    batch[START_STATE] = state.reshape(n * per_env, *state.shape[2:])
    return batch


def update_batch(
    policy: TrainablePolicy, rollout: TensorDict, keys: tuple[str, ...], seq_len: int | None
) -> TensorDict:
    """The update rows: flat ``[N·T]`` transitions, or ``[N·T/L]`` sequences for a recurrent policy.

    A sequence batch holds each key as ``[N·T/L, L, ...]`` plus ``start_state`` ``[N·T/L, S]``.
    """
    if policy.is_recurrent:
        batch = sequence_batch(rollout, keys, seq_len)
    else:
        batch = flatten_transitions(rollout, keys)
    return TensorDict(batch, batch_size=[batch["obs"].shape[0]])


def minibatch_rows(cfg: UpdateCfg, batch: TensorDict | dict[str, torch.Tensor]) -> int:
    """Rows per minibatch: ``cfg.minibatch_size`` transitions, or whole sequences for a sequence batch.

    Sequences: ``ceil(rows / num_mini_batches)`` when set, else ``batch_size // L`` (at least one).
    """
    rows = batch["obs"].shape[0]
    if START_STATE not in batch.keys():
        return cfg.minibatch_size(rows)
    if cfg.num_mini_batches is not None:
        return math.ceil(rows / cfg.num_mini_batches)
    return max(1, cfg.batch_size // batch["obs"].shape[1])

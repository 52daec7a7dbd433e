"""Truncated BPTT for recurrent policies: ``seq_len`` chunks of the rollout as minibatch rows.

The ``[N, T]`` transitions are cut into ``N·T/L`` sequences of ``L = seq_len`` steps (env-major,
each inside one env's time axis). A minibatch is a set of whole sequences; the policy re-runs its
core over each from the state the collector stored at the sequence start
(``rollout["recurrent_state"][:, k·L]``) and resets it to zero after every ``done`` inside the
chunk, so gradients flow back to the first step of the sequence and never across an episode
boundary. rl8's ``seq_len`` / ``seqs_per_state_reset`` semantics (``RecurrentAlgorithmConfig``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.algorithms.base import Minibatch, flatten_transitions
from rlpipe.config.algorithms import SequenceCfg
from rlpipe.rollout import rollout_dims

__all__ = [
    "RECURRENT_STATE",
    "SequenceCfg",
    "evaluate_minibatch",
    "evaluate_sequences",
    "minibatch_rows",
    "sequence_batch",
    "update_batch",
]

RECURRENT_STATE = "recurrent_state"
"""Rollout key of the core state ``[N, T+1, S]`` (written at sequence starts, zero elsewhere)."""
START_STATE, DONE = "start_state", "done"


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
    policy: Any, rollout: TensorDict, keys: tuple[str, ...], seq_len: int | None
) -> TensorDict:
    """The update rows: flat ``[N·T]`` transitions, or ``[N·T/L]`` sequences for a recurrent policy.

    A sequence batch holds each key as ``[N·T/L, L, ...]`` plus ``start_state`` ``[N·T/L, S]``.
    """
    if getattr(policy, "is_recurrent", False):
        batch = sequence_batch(rollout, keys, seq_len)
    else:
        batch = flatten_transitions(rollout, keys)
    return TensorDict(batch, batch_size=[batch["obs"].shape[0]])


def minibatch_rows(cfg: Any, batch: TensorDict | dict[str, torch.Tensor]) -> int:
    """Rows per minibatch: ``cfg.minibatch_size`` transitions, or whole sequences for a sequence batch.

    Sequences: ``ceil(rows / num_mini_batches)`` when set, else ``batch_size // L`` (at least one).
    """
    rows = batch["obs"].shape[0]
    if START_STATE not in batch.keys():
        return cfg.minibatch_size(rows)
    if cfg.num_mini_batches is not None:
        return math.ceil(rows / cfg.num_mini_batches)
    return max(1, cfg.batch_size // batch["advantage"].shape[1])


def evaluate_minibatch(
    policy: Any, mb: Minibatch
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Minibatch]:
    """``(log_prob, entropy, value)`` ``[B]`` in float32 and the flat minibatch the loss reads.

    Transition minibatches go through ``policy.evaluate``; sequence minibatches (they carry
    ``start_state``) through :func:`evaluate_sequences`.
    """
    if START_STATE in mb.keys():
        return evaluate_sequences(policy, mb)
    log_prob, entropy, value = policy.evaluate(mb["obs"], mb["action"])
    return log_prob.float(), entropy.float(), value.float(), mb


def evaluate_sequences(
    policy: Any, mb: Minibatch
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, TensorDict]:
    """``(log_prob, entropy, value)`` flattened to ``[B·L]`` (float32), and ``mb`` flattened alike.

    ``mb`` holds ``[B, L, ...]`` sequences and ``start_state`` ``[B, S]``; the flat minibatch (a
    TensorDict ``[B·L]``) drops ``start_state`` and ``done`` so the feedforward loss reads it unchanged.
    """
    log_prob, entropy, value = policy.evaluate_sequence(mb["obs"], mb["action"], mb[START_STATE], mb[DONE])
    flat = {key: mb[key].flatten(0, 1) for key in mb.keys() if key not in (START_STATE, DONE)}
    return (log_prob.flatten().float(), entropy.flatten().float(), value.flatten().float(),
            TensorDict(flat, batch_size=[log_prob.numel()]))

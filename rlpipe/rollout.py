"""The ``[N, T+1]`` rollout schema (the only definition): keys, dtypes, padding, allocation.

One TensorDict per iteration, ``batch_size=[N, T+1]``, dims named ``("env", "time")``.

==================  ====================  =====================================================
key                 shape                 meaning
==================  ====================  =====================================================
``obs``             ``[N, T+1, *obs]``    ``obs[:, t]`` is seen before action t; slot T is the
                                          bootstrap observation
``action``          ``[N, T+1, *act]``    slot T is padding
``sample_log_prob`` ``[N, T+1]``          log π_old(a|s) summed over action dims; slot T padding
``value``           ``[N, T+1]``          V(obs[:, t]); ``value[:, T]`` is the bootstrap value
``reward``          ``[N, T+1]``          slot T padding
``terminated``      ``[N, T+1]`` bool     slot T padding
``truncated``       ``[N, T+1]`` bool     slot T padding
``done``            ``[N, T+1]`` bool     ``terminated | truncated``; slot T padding
``final_value``     ``[N, T+1]``          V(true final obs) where ``truncated``, else 0
==================  ====================  =====================================================

Policy extras (allocated through ``allocate_rollout(..., extras=...)``, present only for the
policies that need them):

====================  ====================  ===================================================
key                   shape                 meaning
====================  ====================  ===================================================
``recurrent_state``   ``[N, T+1, S]``       recurrent policies: the core state before step t at
                                            every sequence start (``t % seq_len == 0``), zero
                                            after a done; other slots (and slot T) are zero
``success``           ``[N, T+1]`` bool     envs that report ``info["success"]``: that flag after
                                            action t; slot T padding
``action_mean``       ``[N, T+1, *act]``    ``store.action_mean: true``: the policy's
                                            deterministic action at ``obs[:, t]`` (Gaussian
                                            mean, Beta mode, categorical argmax); slot T
                                            padding
====================  ====================  ===================================================

Beside the rollout, the collector gathers the true final observations of the episodes that ended
(:func:`gather_final_obs`), sparse: only at done slots, never a dense copy of ``obs``:

=====================  ===============  ======================================================
key                    shape            meaning
=====================  ===============  ======================================================
``index``              ``[K, 2]`` int64 ``(env, t)`` of each done slot, in row-major order
``obs``                ``[K, *obs]``    the true last observation of the episode that ended
                                        there (per group ``[K, *shape]`` for dict observations)
=====================  ===============  ======================================================

It is stored as the ``final_obs`` group of the rollout's store; and every store records
``reset_at_start``, whether the collector reset the envs before the rollout's first step (so
whether an episode continues from the previous rollout is a recorded fact).

Padding slots hold zeros (``False`` for flags). Envs auto-reset inside ``step``: after a done,
``obs[:, t+1]`` is the first observation of the next episode.

Dict observations (an ``ObsSpec`` mapping keys to shapes): ``obs`` is a nested TensorDict
``[N, T+1]`` with one ``[N, T+1, *shape]`` float32 entry per key (stored as one Zarr array per
key, ``obs/<key>``); the policy selects and concatenates the keys it reads. An *image group* is an
entry of dtype uint8 and shape ``[N, T+1, C, H, W]`` (pixels 0–255, never scaled in the rollout,
the store or a minibatch: the policy's encoder scales them); ``obs_dtypes`` of
:func:`allocate_rollout` names those keys.

:data:`KEY_DTYPES` lists the keys every rollout holds and their dtypes, :data:`TRANSITION_KEYS` those
whose slot T is padding; :mod:`rlpipe.rollout_checks` checks a rollout against them
(:func:`~rlpipe.rollout_checks.validate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from tensordict import TensorDict

__all__ = [
    "ACTION_MEAN",
    "DIM_NAMES",
    "FLAG_KEYS",
    "IMAGE_DTYPE",
    "IMAGE_RANK",
    "KEY_DTYPES",
    "REQUIRED_KEYS",
    "ObsSpec",
    "SCHEMA_VERSION",
    "RECURRENT_KEYS",
    "RECURRENT_STATE",
    "TRANSITION_KEYS",
    "allocate_rollout",
    "FINAL_OBS",
    "RESET_AT_START",
    "STEP_KEYS",
    "SUCCESS",
    "gather_final_obs",
    "obs_from_state",
    "obs_state",
    "rollout_dims",
    "time_slots",
    "transition_view",
    "write_obs",
    "zeros_obs",
]

ObsSpec = tuple[int, ...] | dict[str, tuple[int, ...]]
"""Shape of one observation, or ``{key: shape}`` for dict observations."""

IMAGE_DTYPE = torch.uint8
"""dtype of an image group: ``[N, T+1, C, H, W]`` pixels."""
IMAGE_RANK = 3
"""Feature dims of one image: ``[C, H, W]``."""

SCHEMA_VERSION = 1
"""Bumped whenever a key, dtype or meaning above changes; stored with every rollout."""

FLAG_KEYS = ("terminated", "truncated", "done")
TRANSITION_KEYS = ("action", "sample_log_prob", "reward", "final_value", *FLAG_KEYS)
"""Keys whose slot T is padding (everything except ``obs`` and ``value``): zero, ``False`` for flags."""
KEY_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "obs": (torch.float32, IMAGE_DTYPE),  # every entry, for dict observations; uint8: image groups
    "action": (torch.int64, torch.float32),  # Discrete, Box
    "sample_log_prob": (torch.float32,),
    "value": (torch.float32,),
    "reward": (torch.float32,),
    "final_value": (torch.float32,),
    **{key: (torch.bool,) for key in FLAG_KEYS},
}
"""The keys every rollout holds and the dtypes each may have; policy extras come on top."""
REQUIRED_KEYS = tuple(KEY_DTYPES)
"""The keys every rollout, and every rollout store, holds."""
STEP_KEYS = ("obs", "action", "sample_log_prob", "reward", "terminated", "truncated")
"""The keys the collector writes at every step t < T; the others it fills once per rollout."""
DIM_NAMES = ("env", "time")
"""Names of the two batch dims ``[N, T+1]``."""
ACTION_MEAN = "action_mean"
"""The policy's deterministic action ``[N, T+1, *act]`` per step (``store.action_mean``); slot T padding."""
SUCCESS = "success"
"""The per-step success flag ``[N, T+1]`` bool, in rollouts of envs that report ``info["success"]``."""
FINAL_OBS = "final_obs"
"""The sparse final observations at done slots (:func:`gather_final_obs`): ``index`` and ``obs``."""
RESET_AT_START = "reset_at_start"
"""Store attribute: the collector reset every env before this rollout's first step."""

RECURRENT_STATE = "recurrent_state"
"""Policy extra of recurrent policies: the core state ``[N, T+1, S]`` at sequence starts (table above)."""
RECURRENT_KEYS = ("done", RECURRENT_STATE)
"""Rollout keys a recurrent policy's update reads beside the algorithm's own: its sequences cut at
``done`` and start from ``recurrent_state``."""


def _groups(obs: TensorDict) -> list[tuple[str, torch.Tensor]]:
    """``(key, tensor)`` of each group of a dict observation (flat: every value is a tensor)."""
    groups = []
    for key, value in obs.items():
        assert isinstance(value, torch.Tensor), key
        groups.append((key, value))
    return groups


def zeros_obs(
    spec: Sequence[int] | dict[str, Sequence[int]],
    batch: Sequence[int],
    device: torch.device | str,
    dtypes: dict[str, torch.dtype] | None = None,
) -> torch.Tensor | TensorDict:
    """Zero observations ``[*batch, *shape]``, or a TensorDict ``batch`` of them per key.

    float32, except the keys of ``dtypes`` (``{key: torch.uint8}`` for image groups).
    """
    if isinstance(spec, dict):
        dtypes = dtypes or {}
        fields = {
            k: torch.zeros(*batch, *s, dtype=dtypes.get(k, torch.float32), device=device)
            for k, s in spec.items()
        }
        return TensorDict(fields, batch_size=list(batch), device=device)
    return torch.zeros(*batch, *spec, dtype=torch.float32, device=device)


def time_slots(buffer: torch.Tensor | TensorDict) -> list[torch.Tensor | dict[str, torch.Tensor]]:
    """The per-step views ``buffer[:, t]`` of an ``[N, T, ...]`` buffer, for every t, made once.

    A dict-observation buffer (a TensorDict) gives ``{key: [N, dim] view}`` per step. Writing
    through a view made in advance (``slots[t].copy_(x)``) skips the indexing of ``buffer[:, t] = x``,
    which costs more than the copy itself for a few envs.
    """
    if isinstance(buffer, TensorDict):
        leaves = _groups(buffer)
        return [{key: value[:, t] for key, value in leaves} for t in range(buffer.shape[1])]
    return list(buffer.unbind(1))


def write_obs(slot: torch.Tensor | dict[str, torch.Tensor], obs: torch.Tensor | TensorDict) -> None:
    """Copy ``obs`` ``[N, ...]`` into one step's view of a buffer (:func:`time_slots`), key by key for dicts.

    A plain tensor copy per key costs a fraction of TensorDict's generic indexed assignment.
    """
    if isinstance(slot, dict):
        assert not isinstance(obs, torch.Tensor), "a dict slot holds a dict observation"
        for key, value in slot.items():
            value.copy_(obs[key])
    else:
        slot.copy_(obs)


def obs_state(obs: torch.Tensor | TensorDict | None) -> torch.Tensor | dict[str, torch.Tensor] | None:
    """A checkpointable copy of ``obs``: a tensor, or a plain ``{key: tensor}`` dict.

    ``weights_only`` checkpoint loading refuses TensorDicts.
    """
    if isinstance(obs, TensorDict):
        return {k: v.clone() for k, v in _groups(obs)}
    return None if obs is None else obs.clone()


def obs_from_state(
    state: torch.Tensor | dict[str, torch.Tensor] | None, device: torch.device | str
) -> torch.Tensor | TensorDict | None:
    """Inverse of :func:`obs_state` on ``device``."""
    if isinstance(state, dict):
        batch = [next(iter(state.values())).shape[0]]
        return TensorDict({k: v.to(device) for k, v in state.items()}, batch_size=batch, device=device)
    return None if state is None else state.to(device)


def allocate_rollout(
    num_envs: int,
    horizon: int,
    obs_shape: Sequence[int] | dict[str, Sequence[int]],
    action_shape: Sequence[int],
    action_dtype: torch.dtype,
    device: torch.device | str,
    extras: Mapping[str, tuple[Sequence[int], torch.dtype]] | None = None,
    obs_dtypes: dict[str, torch.dtype] | None = None,
) -> TensorDict:
    """Zero-filled rollout of ``batch_size=[num_envs, horizon + 1]`` on ``device``.

    ``extras`` maps additional policy keys to ``(feature_shape, dtype)`` (e.g. ``action_mean``).
    ``obs_shape`` as ``{key: shape}`` makes ``obs`` a nested TensorDict (dict observations);
    ``obs_dtypes`` gives the keys that are not float32 (``{"pixels": torch.uint8}``).
    """
    n, t1 = num_envs, horizon + 1
    fields = {
        "obs": zeros_obs(obs_shape, (n, t1), device, obs_dtypes),
        "action": torch.zeros(n, t1, *action_shape, dtype=action_dtype, device=device),
    }
    fields |= {
        k: torch.zeros(n, t1, dtype=KEY_DTYPES[k][0], device=device)  # scalars per step
        for k in REQUIRED_KEYS
        if k not in fields
    }
    for key, (shape, dtype) in (extras or {}).items():
        fields[key] = torch.zeros(n, t1, *shape, dtype=dtype, device=device)
    return TensorDict(fields, batch_size=[n, t1], device=device, names=list(DIM_NAMES))


def gather_final_obs(final_obs: torch.Tensor | TensorDict, done: torch.Tensor) -> TensorDict:
    """The sparse final observations: a TensorDict ``[K]`` of ``index`` ``[K, 2]`` and ``obs`` ``[K, *obs]``.

    ``final_obs``: ``[N, T, *obs]`` (a TensorDict per group for dict observations), valid at the done
    slots; ``done``: ``[N, T]`` bool. Gathered on their device, rows in ``(env, t)`` order; one host
    sync (K is the number of dones).
    """
    index = done.nonzero()
    env, t = index[:, 0], index[:, 1]
    if isinstance(final_obs, TensorDict):
        obs = TensorDict(
            {k: v[env, t] for k, v in final_obs.items()}, batch_size=[len(index)], device=index.device
        )
    else:
        obs = final_obs[env, t]
    return TensorDict({"index": index, "obs": obs}, batch_size=[len(index)], device=index.device)


def rollout_dims(rollout: TensorDict) -> tuple[int, int]:
    """``(N, T)``: number of envs and number of transitions (the batch is ``[N, T+1]``)."""
    n, t1 = rollout.batch_size
    return n, t1 - 1


def transition_view(rollout: TensorDict) -> TensorDict:
    """The ``[N, T]`` view of valid transitions, plus ``next_value = value[:, 1:]``.

    A view, not a copy: the padding slot T is sliced away and ``obs``/``value`` keep slot t.
    """
    view = rollout[:, :-1]
    view.set("next_value", rollout["value"][:, 1:])
    return view

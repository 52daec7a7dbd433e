"""The memory a run's params ask for, checked against the memory there is before anything is allocated.

:func:`check_memory` is called twice while a run is built: before the env exists (observation and
action sizes unknown: one float each, a lower bound, so ``trainer.num_envs: 1000000000`` is refused
before an env allocates its state) and again once the env's spaces are known, before the policy,
the rollout or the store's staging buffers exist. Either call refuses in one line naming the key,
the estimate and the limit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from rlpipe.config import AlgorithmCfg, ConfigError, RunConfig, UpdateCfg

if TYPE_CHECKING:
    import gymnasium as gym

__all__ = ["Need", "available_memory", "check_memory", "estimate", "format_bytes"]

ADAM_BYTES_PER_PARAM = 16
"""float32 weight, gradient and Adam's two moments."""
IMAGE_FEATURES = 128
"""What an image group adds to an MLP's input (the CNN encoder's default ``features``)."""


@dataclass(frozen=True)
class Need:
    """One term of the estimate: its bytes, on which memory, and the key that sizes it most."""

    what: str
    key: str
    bytes: int
    on_device: bool


def available_memory(device: torch.device | str) -> int:
    """Bytes that may still be allocated on ``device``: free CUDA memory, or the host's ``MemAvailable``."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:  # noqa: PTH123  # a kernel file, not a run file
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_memory(
    cfg: RunConfig,
    obs_space: gym.Space | None = None,
    action_space: gym.Space | None = None,
    device: torch.device | str = "cpu",
    available: Callable[[torch.device], int] | None = None,
) -> None:
    """``ConfigError`` naming the key when the run's estimated memory exceeds what is available.

    The estimate (:func:`estimate`), in bytes, with N = ``trainer.num_envs``, T = ``buffer_size``,
    s = bytes per env step = obs + 3 × action (action, and a Gaussian's mean and std) + 32 (the
    schema's four float32 and three bool arrays, rounded up), E = ``num_eval_envs``::

        rollout        2 × N × (T+1) × s      the collector's rollout and the update's copies
        store staging  queue_size × N × (T+1) × s   (host memory; only with store.enabled)
        eval envs      2 × E × s
        networks       16 × parameters          weight, gradient, two Adam moments (float32)
                                                 of actor, critic, RND predictor + target, V_int
        activations    Σ 4 × 2 × rows × widest layer, over the networks   rows = max(N, minibatch)

    MLP parameters: Σ (inputs + 1) × outputs over the layers ``hidden_sizes`` names; the input is
    the observation's size (an image group counts 128 features). On a CUDA device every term but
    the staging is compared with the device's free memory, the staging with the host's; on the CPU
    the sum with the host's ``MemAvailable``. ``obs_space``/``action_space`` ``None``: one float
    each (a lower bound, before the env exists). ``available``: bytes free on a device (tests).
    """
    device, host = torch.device(device), torch.device("cpu")
    free = available or available_memory
    needs = estimate(cfg, obs_space, action_space, on_device=device.type == "cuda")
    pools = (
        [(device, [n for n in needs if n.on_device]), (host, [n for n in needs if not n.on_device])]
        if device.type == "cuda"
        else [(host, needs)]
    )
    for where, terms in pools:
        total = sum(need.bytes for need in terms)
        if terms and total > (limit := free(where)):
            _refuse(terms, total, limit, where)


def _refuse(terms: list[Need], total: int, limit: int, device: torch.device) -> None:
    top = max(terms, key=lambda need: need.bytes)
    parts = ", ".join(f"{need.what} {format_bytes(need.bytes)}" for need in terms if need.bytes)
    where = "free on the GPU" if device.type == "cuda" else "available"
    raise ConfigError(
        f"{top.key}: the run needs about {format_bytes(total)} of memory ({parts}) but "
        f"{format_bytes(limit)} is {where}; lower {top.key}"
    )


def estimate(
    cfg: RunConfig,
    obs_space: gym.Space | None = None,
    action_space: gym.Space | None = None,
    on_device: bool = False,
) -> list[Need]:
    """The terms of :func:`check_memory`'s sum, in bytes (``on_device``: the run's device is CUDA)."""
    trainer, algo = cfg.trainer, cfg.algorithm.cfg
    obs, obs_in = _space_bytes(obs_space), _mlp_inputs(obs_space)
    act, act_dim = _space_bytes(action_space), _head_size(action_space)
    step = obs + 3 * act + 32
    n, t1 = trainer.num_envs, trainer.buffer_size + 1
    envs_key = "trainer.num_envs" if n >= trainer.buffer_size else "trainer.buffer_size"
    nets = _network_params(cfg, obs_in, act_dim)
    rows = max(n, _minibatch(algo, n * trainer.buffer_size))
    needs = [Need("rollout", envs_key, 2 * n * t1 * step, on_device)]
    if cfg.store.enabled:
        # a queue of more than 2 rollouts outweighs the rollout's own two copies: the key to lower
        staging_key = "store.queue_size" if cfg.store.queue_size > 2 else envs_key
        needs.append(Need("store staging", staging_key, cfg.store.queue_size * n * t1 * step, False))
    if trainer.enable_eval:
        needs.append(Need("eval envs", "trainer.num_eval_envs", 2 * trainer.num_eval_envs * step, on_device))
    for what, key, params, per_param in nets:
        needs.append(Need(what, key, per_param * params, on_device))
    rows_key = "trainer.num_envs" if rows == n else "algorithm.cfg.batch_size"
    activations = [
        (key if widest > rows else rows_key, 4 * 2 * rows * widest) for key, widest in _widest_layers(cfg)
    ]
    top_key = max(activations, key=lambda item: item[1])[0]
    needs.append(Need("activations", top_key, sum(size for _, size in activations), on_device))
    return needs


def _network_params(cfg: RunConfig, obs_in: int, act_dim: int) -> list[tuple[str, str, int, int]]:
    """``(network, key of its widths, parameters, bytes per parameter)`` of every network in the params.

    A trained network holds :data:`ADAM_BYTES_PER_PARAM` per parameter, RND's frozen target 4.
    """
    policy, algo = cfg.policy, cfg.algorithm.cfg
    head = 2 * act_dim if policy.distribution in ("gaussian_state_std", "beta") else act_dim
    nets = [
        (
            "actor",
            "policy.actor.network_cfg.hidden_sizes",
            policy.actor.network_cfg.hidden_sizes,
            head,
            ADAM_BYTES_PER_PARAM,
        )
    ]
    if policy.critic is not None and policy.name != "actor_only":
        critic = policy.critic.network_cfg.hidden_sizes
        nets.append(("critic", "policy.critic.network_cfg.hidden_sizes", critic, 1, ADAM_BYTES_PER_PARAM))
    rnd = getattr(algo, "rnd", None)
    if rnd is not None:
        key = "algorithm.cfg.rnd.hidden_sizes"
        nets.append(("RND predictor", key, rnd.hidden_sizes, rnd.embedding_dim, ADAM_BYTES_PER_PARAM))
        nets.append(("RND target", key, rnd.hidden_sizes, rnd.embedding_dim, 4))
        if rnd.intrinsic_critic:
            nets.append(
                (
                    "intrinsic critic",
                    "algorithm.cfg.rnd.critic_hidden_sizes",
                    rnd.critic_hidden_sizes,
                    1,
                    ADAM_BYTES_PER_PARAM,
                )
            )
    return [
        (what, key, _mlp_params(obs_in, list(sizes), out), per_param)
        for what, key, sizes, out, per_param in nets
    ]


def _widest_layers(cfg: RunConfig) -> list[tuple[str, int]]:
    """``(key of the widths, widest layer)`` of every network an update's forward pass runs."""
    policy, rnd = cfg.policy, getattr(cfg.algorithm.cfg, "rnd", None)
    nets = [("policy.actor.network_cfg.hidden_sizes", policy.actor.network_cfg.hidden_sizes)]
    if policy.critic is not None:
        nets.append(("policy.critic.network_cfg.hidden_sizes", policy.critic.network_cfg.hidden_sizes))
    if rnd is not None:
        nets += [("algorithm.cfg.rnd.hidden_sizes", rnd.hidden_sizes)] * 2
    return [(key, max(sizes, default=1)) for key, sizes in nets]


def _mlp_params(inputs: int, hidden: list[int], outputs: int) -> int:
    widths = [inputs, *hidden, outputs]
    return sum((a + 1) * b for a, b in zip(widths, widths[1:]))


def _minibatch(algo: AlgorithmCfg, transitions: int) -> int:
    size = algo.minibatch_size if isinstance(algo, UpdateCfg) else None
    return min(size(transitions), transitions) if size is not None else transitions


def _leaves(space: gym.Space) -> Iterable[gym.Space]:
    inner = getattr(space, "spaces", None)
    if isinstance(inner, dict):
        for sub in inner.values():
            yield from _leaves(sub)
    else:
        yield space


def _is_image(space: gym.Space) -> bool:
    shape = getattr(space, "shape", None) or ()
    return len(shape) == 3 and str(getattr(space, "dtype", "")) == "uint8"


def _head_size(space: gym.Space | None) -> int:
    """Outputs of an actor for a space: a Discrete's ``n`` logits, a Box's elements (``None``: one)."""
    if space is None:
        return 1
    return sum(int(getattr(leaf, "n", 0)) or math.prod(leaf.shape or (1,)) for leaf in _leaves(space))


def _space_bytes(space: gym.Space | None) -> int:
    """Bytes of one value of a space as the rollout stores it (``None``: 4, one float)."""
    if space is None:
        return 4
    return sum(
        math.prod(leaf.shape or (1,)) * max(getattr(leaf.dtype, "itemsize", 8), 1) for leaf in _leaves(space)
    )


def _mlp_inputs(space: gym.Space | None) -> int:
    """An MLP's input width: vector groups flat, each image group its encoder's features."""
    if space is None:
        return 1
    return sum(
        IMAGE_FEATURES if _is_image(leaf) else math.prod(leaf.shape or (1,)) for leaf in _leaves(space)
    )


def format_bytes(count: float) -> str:
    """``1.2 GB``: decimal units, one decimal."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if count < 1000 or unit == "PB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} PB"

"""Process-level context: the device this process trains on (and, under torchrun, its rank)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from rlpipe.config import ConfigError

__all__ = [
    "DistContext",
    "all_reduce_mean",
    "all_reduce_sum",
    "average_gradients",
    "barrier",
    "batch_moments",
    "broadcast_parameters",
    "gather_objects",
    "get_rank",
    "global_minibatch_count",
    "global_normalize",
    "init_distributed",
    "launched_by_torchrun",
    "rank_device",
    "rank_zero_decides",
    "resolve_device",
    "sharded_minibatch_indices",
    "shutdown",
    "world_size",
]


def resolve_device(spec: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; ``cuda[:N]`` must exist (else a one-line ``ConfigError``)."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"trainer.device: {spec!r} requested but this machine has no CUDA (torch "
                f"{torch.__version__}); use trainer.device: auto (CUDA when present, else CPU), e.g. "
                "--set trainer.device=auto"
            )
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"trainer.device: {spec!r} does not exist ({torch.cuda.device_count()} CUDA devices)"
            )
    return device


REQUIRED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun (or any launcher) sets for every process of a distributed run."""


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in the run: its rank, the world size, its local rank and device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that evaluates, checkpoints and logs."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """More than one process."""
        return self.world_size > 1


def launched_by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """True when a launcher set ``RANK`` and ``WORLD_SIZE`` (``torchrun … -m rlpipe run`` needs no flag)."""
    environ = os.environ if environ is None else environ
    return "RANK" in environ and "WORLD_SIZE" in environ


def _env_ints(environ: Mapping[str, str]) -> tuple[int, int, int]:
    missing = [name for name in REQUIRED_ENV if name not in environ]
    if missing:
        raise ConfigError(
            f"trainer.distributed: {', '.join(missing)} not set; launch with "
            "`torchrun --nproc_per_node K -m rlpipe run params.yaml`"
        )
    try:
        rank, world, local = (int(environ[name]) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    except ValueError:
        raise ConfigError("trainer.distributed: RANK, WORLD_SIZE and LOCAL_RANK must be integers") from None
    if not 0 <= rank < world:
        raise ConfigError(f"trainer.distributed: RANK={rank} is outside WORLD_SIZE={world}")
    return rank, world, local


def rank_device(spec: str, local_rank: int) -> torch.device:
    """The device of local rank ``local_rank``: ``cuda:LOCAL_RANK`` under ``auto``/``cuda``, else CPU.

    ``cuda:N`` pins every rank to one GPU, which NCCL cannot share: a one-line ``ConfigError``, as
    is a ``LOCAL_RANK`` beyond this node's GPUs.
    """
    device = resolve_device(spec)
    if device.type != "cuda":
        return device
    if spec not in ("auto", "cuda"):
        raise ConfigError(
            f"trainer.device: {spec!r} pins every rank to one GPU; a distributed run "
            "uses cuda:LOCAL_RANK; accepted: auto, cuda, cpu"
        )
    try:
        return resolve_device(f"cuda:{local_rank}")
    except ConfigError:
        raise ConfigError(
            f"trainer.device: LOCAL_RANK={local_rank} but this node has "
            f"{torch.cuda.device_count()} CUDA devices"
        ) from None


def init_distributed(spec: str, requested: bool, environ: Mapping[str, str] | None = None) -> DistContext:
    """Join the process group (NCCL on CUDA, gloo on CPU) when asked or launched by torchrun.

    ``spec`` is ``trainer.device``; ``requested`` is ``trainer.distributed``/``--distributed``. A
    single process (no request, no launcher) gets ``DistContext(device=resolve_device(spec))``. A
    request without the launcher's variables is a one-line ``ConfigError``; so is a device that
    does not exist on this node.
    """
    environ = os.environ if environ is None else environ
    if not (requested or launched_by_torchrun(environ)):
        return DistContext(device=resolve_device(spec))
    rank, world, local = _env_ints(environ)
    device = rank_device(spec, local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
    return DistContext(rank, world, local, device)


def world_size() -> int:
    """Processes in the default group; 1 without one."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def get_rank() -> int:
    """Rank of this process in the default group; 0 without one."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum of ``t`` over every rank (a new tensor); ``t`` itself in a single process."""
    if world_size() == 1:
        return t
    out = t.detach().clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def all_reduce_mean(t: torch.Tensor) -> torch.Tensor:
    """Mean of ``t`` over every rank; ``t`` itself in a single process."""
    size = world_size()
    return t if size == 1 else all_reduce_sum(t) / size


def average_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Average every parameter's ``.grad`` over the ranks: flatten → one all-reduce → divide.

    Called by the algorithms before gradient clipping on every minibatch step, so every rank clips
    and steps with the same gradient. Parameters without a gradient count as zeros, so every rank
    sends a buffer of the same layout.
    """
    size = world_size()
    if size == 1:
        return
    params = [p for p in params if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= size
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).to(p.dtype)
        offset += n


def global_minibatch_count(num_samples: int, batch_size: int, device: torch.device) -> int:
    """The most minibatches any rank has (ranks step together, so all take that many steps)."""
    count = torch.tensor(-(-num_samples // batch_size), device=device)
    if world_size() > 1:
        dist.all_reduce(count, op=dist.ReduceOp.MAX)
    return int(count)


def broadcast_parameters(module: torch.nn.Module, src: int = 0) -> None:
    """Copy rank ``src``'s parameters and buffers into every rank's ``module`` (in place)."""
    if world_size() == 1:
        return
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.data, src=src)


def global_normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``normalize`` with the mean and (unbiased) std of ``x`` over every rank.

    One all-reduce of (sum, sum of squares, count) in float64; identical to normalizing the
    concatenation of every rank's ``x`` up to rounding.
    """
    flat = x.detach().reshape(-1).double()
    moments = all_reduce_sum(
        torch.stack(
            [
                flat.sum(),
                flat.square().sum(),
                torch.tensor(float(flat.numel()), dtype=torch.float64, device=flat.device),
            ]
        )
    )
    total, squares, count = moments.unbind()
    mean = total / count
    if float(count) < 2:
        return x - mean.to(x.dtype)
    var = (squares - count * mean.square()).clamp_min(0) / (count - 1)
    return (x - mean.to(x.dtype)) / (var.sqrt().to(x.dtype) + eps)


def sharded_minibatch_indices(
    shard_size: int,
    num_shards: int,
    batch_size: int,
    device: torch.device,
    generator: torch.Generator | None = None,
    shuffle: bool = True,
) -> Iterator[torch.Tensor]:
    """Minibatches of ``num_shards`` concatenated shards of ``shard_size`` rows each, as K ranks draw them.

    Every rank permutes its own ``shard_size`` rows with the same (shared-seed) generator and takes
    slice i as its minibatch i; minibatch i here is the concatenation of every shard's slice i, so
    one process over the K shards (``rlpipe replay`` of a K-rank run, the equivalence test) steps
    with exactly the K-rank gradient average. ``shuffle=False``: contiguous slices of every shard.
    """
    perm = (
        torch.randperm(shard_size, device=device, generator=generator)
        if shuffle
        else torch.arange(shard_size, device=device)
    )
    offsets = torch.arange(num_shards, device=device).unsqueeze(1) * shard_size
    for start in range(0, shard_size, batch_size):
        yield (offsets + perm[start : start + batch_size]).reshape(-1)


def rank_zero_decides(flag: bool) -> bool:
    """Rank 0's ``flag`` on every rank (a stop decision read from rank-local metrics)."""
    if world_size() == 1:
        return flag
    out = torch.tensor([float(flag)], device=_collective_device())
    dist.broadcast(out, src=0)
    return bool(out.item())


def _collective_device() -> torch.device:
    """Where the tensors of a collective must live: this rank's GPU under NCCL, the CPU under gloo."""
    if dist.get_backend() == dist.Backend.NCCL:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def gather_objects(obj: object) -> list[object]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` in a single process."""
    if world_size() == 1:
        return [obj]
    out: list[object] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    """Wait for every rank; a no-op in a single process."""
    if world_size() > 1:
        dist.barrier()


def shutdown() -> None:
    """Leave the process group (at the end of a distributed run); a no-op without one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def batch_moments(flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(mean, population var, count)`` over dim 0 of ``flat`` ``[B, *shape]``, across every rank.

    A single process uses ``torch.var_mean`` (bit for bit the one-process numerics); K ranks
    all-reduce (count, sum, sum of squares) in float64, so running statistics (observation and
    reward normalization) stay the same on every rank.
    """
    if world_size() == 1:
        var, mean = torch.var_mean(flat, dim=0, unbiased=False)
        return mean, var, int(flat.shape[0])
    data = flat.double()
    count = torch.full((1, *data.shape[1:]), float(data.shape[0]), dtype=torch.float64, device=data.device)
    total = all_reduce_sum(torch.cat([count, data.sum(0, keepdim=True), data.square().sum(0, keepdim=True)]))
    n, mean = total[0], total[1] / total[0]
    var = (total[2] / n - mean.square()).clamp_min(0)
    return mean.to(flat.dtype), var.to(flat.dtype), int(n.reshape(-1)[0])

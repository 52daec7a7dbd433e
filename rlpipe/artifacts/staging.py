"""Host copies of rollouts on their way to disk: reused host buffers, pinned for CUDA rollouts.

The rollout store holds at most ``store.queue_size`` rollouts, so a pool of that many host buffers
(per rollout layout: keys, shapes, dtypes) serves every submit, and once warm nothing is allocated
per iteration. :meth:`HostStaging.stage` runs on the caller's thread and returns at once:

* a rollout on the CPU (or on several devices) is copied into a free buffer there and then, so the
  collector may refill its own buffer right away;
* a rollout on a CUDA device is cloned on the device (the caller's stream; cheap beside the
  update), and the clone is copied into a pinned buffer by non-blocking copies on a side stream
  that first waits for the clone. The copy overlaps the update instead of stalling the compute
  stream; :meth:`Staged.wait` (on the writer's thread) blocks until the copy is done.

Buffers go back to the pool with :meth:`HostStaging.release` once their rollout is on disk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
from tensordict import TensorDict

__all__ = ["HostStaging", "LeafKey", "Staged", "tensor_leaves"]

LeafKey = str | tuple[str, ...]
"""A leaf's key in a rollout: a name, or the path of names to a nested leaf."""

Layout = tuple[tuple[LeafKey, tuple[int, ...], torch.dtype], ...]
"""``(key, shape, dtype)`` of every leaf of a rollout, in the rollout's key order."""


def tensor_leaves(rollout: TensorDict) -> list[tuple[LeafKey, torch.Tensor]]:
    """``(key, tensor)`` of every leaf of ``rollout``, nested ones under their key paths, in key order."""
    # tensordict types ``items`` as (str, any value); nested leaves come as (key path, tensor)
    leaves = rollout.items(include_nested=True, leaves_only=True)
    return cast("list[tuple[LeafKey, torch.Tensor]]", list(leaves))


def layout_of(rollout: TensorDict) -> Layout:
    """The rollout's leaves as ``(key, shape, dtype)``: buffers of one layout are interchangeable."""
    return tuple((key, tuple(t.shape), t.dtype) for key, t in tensor_leaves(rollout))


@dataclass
class Staged:
    """A rollout's host copy: ``host`` ``[N, T+1]`` on the CPU, complete once :meth:`wait` returns."""

    host: TensorDict
    copied: torch.cuda.Event | None = None
    """Recorded on the side stream after the device → host copies (``None``: the copy is done)."""
    device_clone: TensorDict | None = None
    """The device clone the copies read, kept alive until they finished."""
    final_obs: TensorDict | None = None
    """The sparse final observations ``[K]`` on the host (complete once :meth:`wait` returns)."""
    device_final_obs: TensorDict | None = None
    """Their device tensors, kept alive until the copies finished."""

    def wait(self) -> TensorDict:
        """Block until the host copy is complete; drop the device clone; return ``host``."""
        if self.copied is not None:
            self.copied.synchronize()
            self.copied = None
        self.device_clone = self.device_final_obs = None
        return self.host


class HostStaging:
    """A pool of at most ``capacity`` host buffers per layout, shared by the caller and the writer thread.

    ``allocate(rollout, pinned)`` makes a new buffer and ``is_pinned(buffer)`` tells one made pinned
    (default: plain torch host tensors, pinned with ``pin_memory``); the store's process mode
    allocates in shared memory (:class:`~rlpipe.artifacts.shared_staging.SharedBuffers`).
    """

    def __init__(
        self,
        capacity: int,
        allocate: Callable[[TensorDict, bool], TensorDict] | None = None,
        is_pinned: Callable[[TensorDict], bool] | None = None,
    ) -> None:
        self.capacity = capacity
        self._allocate = allocate or _empty_host
        self._is_pinned = is_pinned or _is_pinned
        self.allocated = 0
        """Buffers allocated so far (all layouts): stays at ``capacity`` in a run of one layout."""
        self._layout: Layout | None = None
        self._free: list[TensorDict] = []
        self._lock = threading.Lock()
        self._streams: dict[torch.device, torch.cuda.Stream] = {}

    def stage(self, rollout: TensorDict, final_obs: TensorDict | None = None) -> Staged:
        """Start the host copy of ``rollout`` (``[N, T+1]``, any device); see the module docstring.

        ``final_obs``: the rollout's sparse final observations ``[K]`` (their size changes every
        rollout, so they are copied into fresh host tensors, pinned ones from torch's caching host
        allocator for a CUDA rollout, on the same side stream). The caller must hold one of the
        store's ``capacity`` slots (so a buffer is free or may be made).
        """
        device = rollout.device
        cuda = device is not None and device.type == "cuda"
        host = self._take(rollout, pinned=cuda)
        if not cuda:
            for key, src in tensor_leaves(rollout):
                host.get(key).copy_(src)
            return Staged(host, final_obs=None if final_obs is None else final_obs.apply(_host_clone))
        assert device is not None  # a CUDA rollout has its one device
        clone = rollout.apply(torch.clone)  # leaf by leaf: TensorDict.clone adds 0, turning -0.0 into +0.0
        with torch.cuda.device(device):
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(device))
            side = self._side_stream(device)
            side.wait_event(ready)
            with torch.cuda.stream(side):
                for key, src in tensor_leaves(clone):
                    host.get(key).copy_(src, non_blocking=True)
                final_host = (
                    None if final_obs is None else final_obs.apply(_pinned_copy, device=torch.device("cpu"))
                )
                copied = torch.cuda.Event()
                copied.record(side)
        return Staged(host, copied, clone, final_host, final_obs)

    def release(self, host: TensorDict) -> None:
        """Return a buffer to the pool (one of another layout than the newest is dropped)."""
        with self._lock:
            if layout_of(host) == self._layout and len(self._free) < self.capacity:
                self._free.append(host)

    def _take(self, rollout: TensorDict, pinned: bool) -> TensorDict:
        layout = layout_of(rollout)
        with self._lock:
            if layout != self._layout:
                self._layout, self._free = layout, []
            for i, buffer in enumerate(self._free):
                if self._is_pinned(buffer) == pinned:
                    return self._free.pop(i)
            self.allocated += 1
        return self._allocate(rollout, pinned)

    def _side_stream(self, device: torch.device) -> torch.cuda.Stream:
        if device not in self._streams:
            self._streams[device] = torch.cuda.Stream(device)
        return self._streams[device]


def _host_clone(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to("cpu", copy=True)


def _pinned_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A pinned host copy of a device tensor, started on the current (side) stream."""
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    return host.copy_(tensor, non_blocking=True)


def _is_pinned(buffer: TensorDict) -> bool:
    return any(t.is_pinned() for _, t in tensor_leaves(buffer)) if torch.cuda.is_available() else False


def _empty_host(rollout: TensorDict, pinned: bool) -> TensorDict:
    """An uninitialised CPU TensorDict of ``rollout``'s keys, shapes and dtypes (pinned if asked)."""
    host = TensorDict({}, batch_size=rollout.batch_size, device=torch.device("cpu"))
    for key, tensor in tensor_leaves(rollout):
        host.set(key, torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=pinned))
    return host

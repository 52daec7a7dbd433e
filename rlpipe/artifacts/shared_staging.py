"""Host buffers in shared memory, for rollouts the writer process writes.

:class:`SharedBuffers` is :class:`~rlpipe.artifacts.staging.HostStaging`'s allocator in the store's
process mode: each host buffer is one anonymous shared-memory segment (``memfd_create``) holding
every leaf of the rollout at an aligned offset, viewed as torch tensors here and as numpy arrays
in the writer process (:mod:`rlpipe.artifacts.writer_process`), which gets the segment's file
descriptor once. When CUDA is available a buffer for a CUDA rollout is page-locked in place
(``cudaHostRegister``), so the side-stream device → host copies land in it directly and run
asynchronously. Segments live until :meth:`SharedBuffers.close`; a run of one rollout layout has
``store.queue_size`` of them.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass
from types import ModuleType

import torch
from tensordict import TensorDict

from rlpipe.artifacts.staging import tensor_leaves
from rlpipe.artifacts.writer_process import Leaf

__all__ = ["Segment", "SharedBuffers"]

_ALIGN = 64


@dataclass
class Segment:
    """One shared buffer: its memory, the leaves' places in it, and the host TensorDict over it."""

    key: int
    fd: int
    size: int
    memory: mmap.mmap
    address: int
    leaves: tuple[Leaf, ...]
    host: TensorDict
    pinned: bool


class SharedBuffers:
    """Allocates host TensorDicts in shared memory and knows each one's :class:`Segment`."""

    def __init__(self) -> None:
        self._segments: dict[int, Segment] = {}  # by id() of the host TensorDict, which the segment keeps

    def allocate(self, rollout: TensorDict, pinned: bool) -> TensorDict:
        """An uninitialised CPU TensorDict of ``rollout``'s keys, shapes and dtypes, in a new segment.

        ``pinned``: page-lock it for CUDA copies (when CUDA is available; otherwise copies into it
        are synchronous, and still correct).
        """
        leaves, size = _places(rollout)
        fd = os.memfd_create("rlpipe-rollout", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.ftruncate(fd, size)
            memory = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        base = torch.frombuffer(memory, dtype=torch.uint8)
        locked = pinned and _page_lock(base)
        host = TensorDict({}, batch_size=rollout.batch_size, device=torch.device("cpu"))
        for (key, tensor), (_, shape, _, offset) in zip(tensor_leaves(rollout), leaves, strict=True):
            view = base[offset : offset + tensor.numel() * tensor.element_size()]
            host.set(key, view.view(tensor.dtype).view(shape))
        segment = Segment(fd, fd, size, memory, base.data_ptr(), leaves, host, locked)
        self._segments[id(host)] = segment
        return host

    def segment_of(self, host: TensorDict) -> Segment:
        """The segment ``host`` (from :meth:`allocate`) lives in."""
        return self._segments[id(host)]

    def is_pinned(self, host: TensorDict) -> bool:
        """Whether ``host`` was allocated page-locked."""
        return self._segments[id(host)].pinned

    def close(self) -> None:
        """Unlock and free every segment (no copy into or write from them may be running)."""
        for segment in self._segments.values():
            if segment.pinned:
                with contextlib.suppress(Exception):
                    _cuda_runtime().cudaHostUnregister(segment.address)
            segment.host = TensorDict({})  # drop the tensors that export the memory
            with contextlib.suppress(BufferError):
                segment.memory.close()
            os.close(segment.fd)
        self._segments.clear()


def _places(rollout: TensorDict) -> tuple[tuple[Leaf, ...], int]:
    """Every leaf's ``(name, shape, numpy dtype, offset)`` in one segment, and the segment's size."""
    leaves, offset = [], 0
    for key, tensor in tensor_leaves(rollout):
        name = key if isinstance(key, str) else "/".join(key)
        dtype = torch.empty(0, dtype=tensor.dtype).numpy().dtype.str
        leaves.append((name, tuple(tensor.shape), dtype, offset))
        offset += -(-tensor.numel() * tensor.element_size() // _ALIGN) * _ALIGN
    return tuple(leaves), max(offset, _ALIGN)


def _page_lock(base: torch.Tensor) -> bool:
    """Page-lock ``base``'s memory for CUDA (``cudaHostRegister``); whether that succeeded."""
    if not torch.cuda.is_available():
        return False
    return int(_cuda_runtime().cudaHostRegister(base.data_ptr(), base.numel(), 0)) == 0


def _cuda_runtime() -> ModuleType:
    """The CUDA runtime bindings of torch (``cudart()`` initialises CUDA first: never ``None``)."""
    runtime = torch.cuda.cudart()
    assert runtime is not None
    return runtime

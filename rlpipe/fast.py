"""Fast paths: the reimplementations of a library call that one switch turns off, each beside its call.

One switch, the environment variable ``RLPIPE_FAST``, read once when this module is imported: unset
(or any value but ``0``) runs the fast paths, ``RLPIPE_FAST=0`` runs the library calls everywhere.
A fast path gives what its library call gives — the same bits, the same random draws, the same
files — and exists only because the library call does work rlpipe's use of it does not need, on a
path taken every env step, every optimizer step, every rollout or every process:

========================  ========================================  ======================================
function                  library call                              what the fast path skips
========================  ========================================  ======================================
:func:`categorical_draw`  ``torch.multinomial(probs, 1, True)``     multinomial's input checks
                          (``Categorical.sample``'s draw)           (reductions over the probabilities,
                                                                    read back on the host, per draw)
:func:`sequential_forward` ``nn.Sequential.forward``             the module call machinery per layer
                                                                    (hook dispatch, attribute lookups)
:func:`clip_grad_norm`    ``torch.nn.utils.clip_grad_norm_``        the Python grouping of gradients by
                                                                    device and dtype around its kernels
:func:`write_zarr_store`  zarr's writer                             zarr's event loop, threads and
                          (``rlpipe.artifacts.zarr_write``)         metadata objects per store, which
                                                                    hold the interpreter lock the
                                                                    training thread needs
:func:`zarr_array_metadata` an array's ``zarr.json`` as           importing zarr at all in a writer
                          ``zarr.create_array`` writes it           process that writes uncompressed
                                                                    stores
:func:`exit_process`      ``sys.exit(code)``                        the interpreter's teardown of every
                                                                    imported module (torch, MLflow, …)
:class:`SqliteRun` in     ``MlflowClient`` on a SQLite store        importing MLflow, SQLAlchemy and
``rlpipe.tracking.        (``MlflowRun``: the run, its params,      alembic, and opening the store, in
mlflow_sqlite``           metrics and artifacts)                    the tracking process (per run)
========================  ========================================  ======================================

The private torch and CPython calls these need (``torch._foreach_*``, module hook tables,
``threading._shutdown``,
``atexit._run_exitfuncs``, ``os._exit``) appear nowhere else in rlpipe. ``tests/test_fast.py``
checks each fast path against its library call (``tests/tracking/test_mlflow_sqlite.py`` the
SQLite one), and a default run with the switch on and off
against the recorded run. Only the standard library is imported here; torch and numpy are imported
by the functions that use them, so the CLI can call :func:`exit_process` without them. zarr is never
imported here: only ``rlpipe.artifacts`` imports it (an import-linter contract).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = [
    "ENABLED",
    "categorical_draw",
    "clip_grad_norm",
    "crc32c_of",
    "exit_process",
    "sequential_forward",
    "write_chunk",
    "write_zarr_store",
    "ZARR_DTYPES",
    "zarr_array_metadata",
    "zarr_group_metadata",
]

ENABLED: bool = os.environ.get("RLPIPE_FAST", "1") != "0"
"""Whether the fast paths run (``RLPIPE_FAST`` is not ``0``); otherwise the library calls do."""


# ------------------------------------------------------------------------------ sampling


def categorical_draw(probs: torch.Tensor) -> torch.Tensor:
    """One categorical draw per row: probabilities ``[..., n]`` → int64 indices ``[...]``.

    Library call: ``torch.multinomial(probs, 1, True)`` over the rows (what
    ``Categorical(probs).sample()`` runs). Fast path: the exponential race multinomial itself runs
    for one sample — the argmax of ``p / q`` with ``q ~ Exp(1)`` drawn from the same generator —
    without its checks that ``probs`` is finite, non-negative and sums above zero (reductions
    whose results it reads back on the host). A non-finite probability still shows: the
    log-probability of the draw is then NaN, which the non-finite guard refuses.
    """
    import torch

    if not ENABLED:
        rows = probs.reshape(-1, probs.shape[-1])
        return torch.multinomial(rows, 1, True).reshape(probs.shape[:-1])
    return (probs / torch.empty_like(probs).exponential_(1)).argmax(-1)


# ------------------------------------------------------------------------------ networks


def sequential_forward(sequential: torch.nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``sequential(x)``: the layers in order, ``[B, in]`` → ``[B, out]``.

    Library call: ``nn.Sequential.forward`` (each layer called as a module). Fast path: Linear
    layers run as ``F.linear`` on their parameters and other layers through their own ``forward``,
    skipping the per-module call machinery (hook dispatch, ``Module.__getattr__``), which costs more
    than a small layer's maths; the same ops, so the same bits. A layer with a hook, or any global
    module hook, takes the module call, so hooks still fire.
    """
    import torch  # a plain import: one dictionary lookup per call (``from … import`` costs more)

    nn = torch.nn
    if not ENABLED:
        return nn.Sequential.forward(sequential, x)
    hooks = nn.modules.module
    hooked = bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks)
    linear = nn.functional.linear
    for module in sequential._modules.values():
        if hooked or module._forward_hooks or module._forward_pre_hooks:
            x = module(x)
        elif type(module) is nn.Linear:
            weights = module._parameters
            x = linear(x, weights["weight"], weights["bias"])  # pyright: ignore[reportArgumentType]  # never None in a Linear
        else:
            x = module.forward(x)
    return x


# ------------------------------------------------------------------------------ gradients


def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients of ``params`` to a total 2-norm of at most ``max_norm``; return the norm before.

    Library call: ``torch.nn.utils.clip_grad_norm_(params, max_norm)``. Fast path, when every
    gradient is dense and on one device in one dtype (every fp32 policy): the library's two foreach
    kernels, the same ops and bits, without its Python grouping of the gradients by device and dtype
    before and after them; other gradients take the library call. ``params`` all have a ``grad``;
    the result is a 0-dim tensor on their device.
    """
    import torch

    grads = cast("list[torch.Tensor]", [p.grad for p in params])  # each has one (see above)
    kinds = {(g.device, g.dtype, g.is_sparse) for g in grads}
    if not ENABLED or len(kinds) != 1 or next(iter(kinds))[2]:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    with torch.no_grad():
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)  # pyright: ignore[reportPrivateImportUsage]
        scale = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
        torch._foreach_mul_(grads, scale)  # pyright: ignore[reportPrivateImportUsage]  # clip_grad_norm_'s kernel
    return total


# ------------------------------------------------------------------------------ zarr stores


def write_zarr_store(
    root: Path,
    arrays: dict[str, np.ndarray],
    attributes: dict[str, Any],
    chunk_envs: int,
    dimension_names: tuple[str, ...] | dict[str, tuple[str, ...]],
    chunk_separator: str,
) -> None:
    """Write a new uncompressed Zarr v3 group at ``root``: the files zarr's writer writes, byte for byte.

    Library call: zarr's writer as :mod:`rlpipe.artifacts.zarr_write` runs it for codec ``none``
    (``create_array`` per key with the ``bytes`` + ``crc32c`` codecs, ``write_empty_chunks``).
    Fast path: plain file writes —

    * ``zarr.json`` of the group (``attributes``) and of every intermediate group of a nested key;
    * per array a ``zarr.json`` (:func:`zarr_array_metadata`; the dtypes of :data:`ZARR_DTYPES`)
      and one file per chunk in the array's folder, ``c.<i>.0…`` (``chunk_separator``, the one that
      metadata declares: ``.``, which names no folder), holding the chunk's raw little-endian bytes
      followed by their CRC32C, written copy-free (:func:`write_chunk`); the edge chunk is padded to
      the full chunk shape with the fill value (zero / ``False``), as zarr pads it.

    ``arrays``: ``{"/"-joined key: [N, T+1, ...] array}`` (nested keys become subgroups), chunked
    ``(min(chunk_envs, N), T+1, ...)``; ``dimension_names`` name the leading dimensions (further
    ones are ``feat0``, ``feat1``, …), for every array or per array name (a sparse ``[K, ...]``
    array has one leading dim).
    """
    root.mkdir()
    (root / "zarr.json").write_bytes(zarr_group_metadata(attributes))
    for name, data in arrays.items():
        _write_zarr_parents(root, name)
        dims = dimension_names[name] if isinstance(dimension_names, dict) else dimension_names
        _write_zarr_array(root / name, data, chunk_envs, dims, chunk_separator)


ZARR_DTYPES = frozenset(
    (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
)
"""The numpy dtypes :func:`zarr_array_metadata` describes (those of a rollout, in any store precision)."""


@functools.lru_cache(maxsize=512)
def zarr_array_metadata(
    shape: tuple[int, ...],
    dtype: str,
    chunks: tuple[int, ...],
    dimension_names: tuple[str, ...],
    separator: str,
) -> bytes:
    """An uncompressed, CRC32C-checked array's ``zarr.json``, byte for byte as zarr writes it.

    Library call: ``zarr.create_array(shape, dtype, chunks, compressors=(Crc32cCodec(),),
    filters=None, dimension_names, chunk_key_encoding={"name": "default", "separator": separator},
    config={"write_empty_chunks": True})`` (its ``zarr.json``). Fast path: the JSON itself, so a
    writer process that writes uncompressed stores never imports zarr. ``dtype``: a name of
    :data:`ZARR_DTYPES` (one-byte types have no endianness, so their ``bytes`` codec has no
    configuration; the fill value is zero of the type). Cached: a run's rollouts repeat their shapes.
    """
    if dtype not in ZARR_DTYPES:
        raise ValueError(f"zarr_array_metadata: dtype {dtype!r} is not one of {sorted(ZARR_DTYPES)}")
    one_byte = dtype in ("bool", "int8", "uint8")
    fill: bool | int | float = False if dtype == "bool" else 0.0 if dtype.startswith("float") else 0
    metadata = {
        "shape": list(shape),
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": separator}},
        "fill_value": fill,
        "codecs": [
            {"name": "bytes"} if one_byte else {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "crc32c"},
        ],
        "attributes": {},
        "dimension_names": list(dimension_names),
        "zarr_format": 3,
        "node_type": "array",
        "storage_transformers": [],
    }
    return json.dumps(metadata, indent=2).encode()


def zarr_group_metadata(attributes: dict[str, Any]) -> bytes:
    """A group's ``zarr.json`` as zarr writes it (indent 2)."""
    return json.dumps({"attributes": attributes, "zarr_format": 3, "node_type": "group"}, indent=2).encode()


def _write_zarr_parents(root: Path, name: str) -> None:
    """Intermediate groups of a nested key (``obs/state`` → group ``obs``), each written once."""
    parts = name.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        folder = root.joinpath(*parts[:depth])
        if not folder.exists():
            folder.mkdir()
            (folder / "zarr.json").write_bytes(zarr_group_metadata({}))


def _write_zarr_array(
    folder: Path,
    data: np.ndarray,
    chunk_envs: int,
    dims: tuple[str, ...],
    separator: str,
) -> None:
    """One array ``[N, *rest]`` at ``folder``: its ``zarr.json`` and a chunk file per ``chunk_envs`` rows."""
    import numpy as np

    n, *rest = data.shape
    rows = max(1, min(chunk_envs, n))  # an empty sparse array: one-row chunks, none written
    chunks = (rows, *rest)
    names = (*dims, *(f"feat{i}" for i in range(data.ndim - len(dims))))
    folder.mkdir()
    (folder / "zarr.json").write_bytes(
        zarr_array_metadata(data.shape, data.dtype.name, chunks, names, separator)
    )
    little = np.ascontiguousarray(data.astype(data.dtype.newbyteorder("<"), copy=False))
    tail = ["0"] * len(rest)
    for i in range(math.ceil(n / rows)):
        block = little[i * rows : (i + 1) * rows]  # rows of a C-contiguous array: a view, no copy
        if block.shape[0] < rows:  # the edge chunk, padded with the fill value (zero / False): the one copy
            block = np.concatenate([block, np.zeros((rows - block.shape[0], *rest), block.dtype)])
        write_chunk(os.path.join(folder, separator.join(("c", str(i), *tail))), block)


def write_chunk(path: str, block: np.ndarray) -> None:
    """Write a chunk file: ``block``'s bytes (C-contiguous) followed by their CRC32C, little-endian.

    Copy-free: the checksum is computed on the array's memory (:func:`crc32c_of`) and the file is
    one ``writev`` of a memoryview of the array and the four checksum bytes, a system call that
    releases the interpreter lock for the whole buffer.
    """
    raw = memoryview(block.reshape(-1).view("u1"))  # pyright: ignore[reportArgumentType]  # an ndarray is a buffer
    crc = struct.pack("<I", crc32c_of(block))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        _write_all(fd, [raw, memoryview(crc)])
    finally:
        os.close(fd)


def _write_all(fd: int, parts: list[memoryview]) -> None:
    """``os.writev(fd, parts)``, then the rest of a short write (a signal, a nearly full disk)."""
    written = os.writev(fd, parts)
    for part in parts:
        if written >= len(part):
            written -= len(part)
            continue
        view, written = part[written:], 0
        while view:
            view = view[os.write(fd, view) :]


def crc32c_of(block: np.ndarray) -> int:
    """CRC32C of a C-contiguous array's bytes, as ``google_crc32c.value(block.tobytes())`` gives it.

    Computed on the array's memory, without the copy ``tobytes`` makes, by the CRC32C library the
    ``google_crc32c`` wheel ships, called through ctypes (which releases the interpreter lock for the
    call). ``google_crc32c.value`` itself takes only ``bytes`` (no memoryview) and releases the
    lock only for those of 1 MiB and more; where the library cannot be found, that call is used on
    a copy.
    """
    value = _crc32c_library()
    if value is None:
        import google_crc32c

        return int(google_crc32c.value(block.tobytes()))
    return int(value(block.__array_interface__["data"][0], block.nbytes))


@functools.cache
def _crc32c_library() -> Any:
    """``crc32c_value(address, size)`` of the ``google_crc32c`` wheel's own library, or ``None``."""
    import ctypes
    import glob

    import google_crc32c

    package = os.path.dirname(google_crc32c.__file__)
    found = sorted(
        glob.glob(os.path.join(package, "libcrc32c*.so*"))
        + glob.glob(os.path.join(package + ".libs", "libcrc32c*.so*"))
    )
    for candidate in found:
        try:
            function = ctypes.CDLL(candidate).crc32c_value
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_uint32
        function.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        if function(b"123456789", 9) == 0xE3069283:  # the CRC32C check value
            return function
    return None


# ------------------------------------------------------------------------------ process exit


def exit_process(code: object = 0) -> NoReturn:
    """End the process with ``code``, as ``sys.exit(code)`` does: ``None`` is 0, a non-int is printed, then 1.

    Library call: ``sys.exit(code)``. Fast path: the steps of a normal exit that matter — join the
    non-daemon threads and run threading's exit hooks (executors' queues) as the interpreter does
    first at exit, run the ``atexit`` handlers (an MLflow flush among them), flush the standard
    streams — then ``os._exit``, skipping the interpreter's teardown of every imported module, which
    nothing the process wrote depends on. Call it from the main thread.
    """
    if not ENABLED:
        sys.exit(code)  # pyright: ignore[reportArgumentType]  # sys.exit takes any object
    import atexit
    import threading

    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter calls first at exit
    if shutdown is not None:
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code or 0)

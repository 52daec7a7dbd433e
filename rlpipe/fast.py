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
:func:`defer_dynamo_      ``torch.compiler.allow_in_graph`` and     importing ``torch._dynamo`` when
for_tensordict`           ``assume_constant_result``, which         tensordict is imported, in a run
                          ``tensordict`` calls on import            that compiles nothing
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
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = [
    "ENABLED",
    "categorical_draw",
    "clip_grad_norm",
    "crc32c_of",
    "defer_dynamo_disables",
    "defer_dynamo_for_tensordict",
    "exit_process",
    "run_then_exit",
    "optimizer_step",
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


def run_then_exit(command: Callable[[], object]) -> NoReturn:
    """Call ``command`` (an entry point that may ``sys.exit``), then :func:`exit_process` with its code.

    A ``SystemExit`` gives its code; a normal return gives 0; any other exception escapes and takes
    the normal exit, traceback included.
    """
    try:
        command()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    exit_process(code)


# ------------------------------------------------------------------------ Dynamo, imported only to compile
#
# A run that compiles nothing never needs ``torch._dynamo``, yet three library paths import it (a
# second or more of every run's start): tensordict's import, the ``torch._disable_dynamo`` methods of
# ``torch.optim.Optimizer`` on their first call, and every ``Optimizer.step``. Each fast path below
# does in eager mode what its library call does, and hands over to the library the moment
# ``torch._dynamo`` is imported by anyone (``torch.compile``, a user): the hook installed by
# ``import rlpipe`` (:func:`defer_dynamo_for_tensordict`) runs :data:`_ON_DYNAMO_IMPORT` then.


def defer_dynamo_for_tensordict() -> None:
    """Import ``tensordict`` without importing ``torch._dynamo``; a no-op with the switch off.

    Library call: ``tensordict.utils`` calls ``torch.compiler.allow_in_graph`` and
    ``assume_constant_result`` when it is imported, and both import ``torch._dynamo``. Fast path:
    while ``tensordict`` is imported, ``assume_constant_result`` sets the attribute Dynamo's sets,
    and ``allow_in_graph`` keeps the function and registers it with Dynamo the moment
    ``torch._dynamo`` is imported (at once if it is already). Installed once, by ``import rlpipe``;
    where ``tensordict`` or ``torch._dynamo`` is already imported it changes nothing.
    """
    if (
        not ENABLED
        or "torch._dynamo" in sys.modules
        or any(isinstance(f, _ImportHook) for f in sys.meta_path)
    ):
        return
    sys.meta_path.insert(0, _ImportHook())


def defer_dynamo_disables(cls: type) -> None:
    """Let ``cls``'s ``torch._disable_dynamo`` methods run without importing ``torch._dynamo``.

    Library call: such a method imports ``torch._dynamo`` on its first call and runs the function
    through ``torch._dynamo.disable``, which in eager mode calls it unchanged. Fast path (while
    ``torch._dynamo`` is not imported): the method's cached disabled function is the function
    itself; the import of ``torch._dynamo`` removes that cache, so from then on the library's
    disable is built and used.
    """
    if (
        not ENABLED
        or "torch._dynamo" in sys.modules
        or not any(isinstance(f, _ImportHook) for f in sys.meta_path)
    ):
        return
    import torch._compile

    disabled = torch._compile._disable_dynamo(lambda: None).__code__  # the wrapper every such method has
    for method in vars(cls).values():
        fn = getattr(method, "__wrapped__", None)
        if (
            getattr(method, "__code__", None) is disabled
            and fn is not None
            and _DISABLE_CACHE not in vars(fn)
        ):
            setattr(fn, _DISABLE_CACHE, fn)
            _ON_DYNAMO_IMPORT.append(functools.partial(_forget_disable, fn))


def optimizer_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``, the same update, without the wrappers that import Dynamo on every step.

    Library call: ``optimizer.step()``: a profiler scope and the step hooks around, inside, grad
    mode set to ``defaults["differentiable"]`` and two ``torch._dynamo.graph_break()`` calls (which
    import ``torch._dynamo``), around the optimizer's own ``step`` body. Fast path, where none of
    that wrapping does anything (no step hooks registered, not differentiable, not compiling, no
    profiler running) and ``step`` is wrapped by torch alone: the body itself under
    ``torch.no_grad()``. A ``step`` that anyone else replaced or wrapped is called as it is.
    """
    import torch

    body = _step_body(optimizer) if ENABLED else None
    if body is None or _step_is_wrapped(optimizer):
        optimizer.step()
        return
    with torch.no_grad():
        body(optimizer)


F = TypeVar("F", bound=Callable[..., object])
_DISABLE_CACHE = "__dynamo_disable"
"""The attribute ``torch._disable_dynamo`` caches a method's disabled function in."""
_ON_DYNAMO_IMPORT: list[Callable[[ModuleType], object]] = []
"""Calls run with the ``torch._dynamo`` module right after it is imported."""


def _hooked() -> bool:
    """Whether the import hook that hands deferred calls to ``torch._dynamo`` is in place."""
    return any(isinstance(finder, _ImportHook) for finder in sys.meta_path)


def _step_is_wrapped(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the wrapping of ``optimizer.step()`` would do anything (then the library call runs)."""
    import torch

    optim_module = sys.modules["torch.optim.optimizer"]  # imported: an optimizer exists
    return bool(
        optimizer.defaults.get("differentiable")
        or optimizer._optimizer_step_pre_hooks
        or optimizer._optimizer_step_post_hooks
        or optim_module._global_optimizer_pre_hooks
        or optim_module._global_optimizer_post_hooks
        or torch.compiler.is_compiling()
        or torch.autograd.profiler._is_profiler_enabled
    )


def _step_body(optimizer: torch.optim.Optimizer) -> Callable[..., object] | None:
    """The optimizer class's own ``step`` under torch's two wrappers; ``None`` if anything else wraps it."""
    from torch.optim import Optimizer
    from torch.optim.optimizer import _use_grad_for_differentiable

    if "step" in vars(optimizer):  # replaced on the instance (a profiler, a test counting steps)
        return None
    torch_wrappers = (
        Optimizer.profile_hook_step(_no_op).__code__,
        _use_grad_for_differentiable(_no_op).__code__,
    )
    step = type(optimizer).step
    while getattr(step, "__code__", None) in torch_wrappers:
        step = step.__wrapped__
    return None if hasattr(step, "__wrapped__") else step


def _no_op() -> None:
    """Stands in for a step to read the code object of torch's step wrappers."""


def _forget_disable(fn: Callable[..., object], dynamo: ModuleType) -> None:
    if vars(fn).get(_DISABLE_CACHE) is fn:
        delattr(fn, _DISABLE_CACHE)


def _allow_in_graph(fn: F) -> F:
    """``torch.compiler.allow_in_graph`` without importing Dynamo first (see above)."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None and hasattr(dynamo, "allow_in_graph"):
        return dynamo.allow_in_graph(fn)
    _ON_DYNAMO_IMPORT.append(lambda module: module.allow_in_graph(fn))
    return fn


def _assume_constant_result(fn: F) -> F:
    """``torch.compiler.assume_constant_result``: the mark Dynamo's own sets, without importing it."""
    fn._dynamo_marked_constant = True
    return fn


class _ImportHook:
    """A ``sys.meta_path`` finder that wraps two imports: ``tensordict`` and ``torch._dynamo``."""

    def find_spec(self, name: str, path: object, target: object = None) -> ModuleSpec | None:
        if name not in ("tensordict", "torch._dynamo"):
            return None
        import importlib.util

        sys.meta_path.remove(self)  # find the real spec with the other finders
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if name == "tensordict":
                sys.meta_path.insert(0, self)  # still needed for torch._dynamo
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        # this spec's own loader (one per module): its import runs inside the wrapper
        spec.loader.exec_module = functools.partial(  # type: ignore[method-assign]
            _import_tensordict if name == "tensordict" else _import_dynamo, run
        )
        return spec


def _import_tensordict(run: Callable[[ModuleType], None], module: ModuleType) -> None:
    """Run ``tensordict``'s import with the two markers replaced, then put torch's back."""
    import torch.compiler

    real = torch.compiler.allow_in_graph, torch.compiler.assume_constant_result
    torch.compiler.allow_in_graph, torch.compiler.assume_constant_result = (
        _allow_in_graph,
        _assume_constant_result,
    )
    try:
        run(module)
    finally:
        torch.compiler.allow_in_graph, torch.compiler.assume_constant_result = real


def _import_dynamo(run: Callable[[ModuleType], None], module: ModuleType) -> None:
    """Run ``torch._dynamo``'s import, then hand every deferred call over to it."""
    run(module)
    for hook in [f for f in sys.meta_path if isinstance(f, _ImportHook)]:
        sys.meta_path.remove(hook)
    for call in _ON_DYNAMO_IMPORT:
        call(module)
    _ON_DYNAMO_IMPORT.clear()

"""Exit codes and one-line messages for every way a command can fail.

====  ===========================================================================================
code  meaning
====  ===========================================================================================
0     done
1     runtime failure: disk full, read-only or permission problem, out of memory, a run dir in
      use by another process, an unexpected error (``--debug`` shows the traceback)
2     bad input: params, options, paths, files that are not what they should be
3     refused data: a NaN/Inf at a stage boundary, a checksum mismatch, a rejected rollout
130   stopped by SIGINT (Ctrl-C); 143: stopped by SIGTERM — a checkpoint of the last complete
      iteration is on disk and the message gives the resume command
====  ===========================================================================================

Exceptions are told apart by class name, so a failing command imports nothing heavy (no torch for a
params error). Every line printed is at most :data:`MAX_LINE` characters (:func:`bounded`): a
message that quotes a huge input keeps its head and tail.
"""

from __future__ import annotations

import errno

__all__ = ["BAD_INPUT", "MAX_LINE", "REFUSED_DATA", "RUNTIME", "bounded", "describe"]

RUNTIME, BAD_INPUT, REFUSED_DATA = 1, 2, 3
MAX_LINE = 1000
"""The most characters an error line holds (what a terminal and a log line can show)."""

_OS_ADVICE = {
    errno.ENOSPC: "the disk is full: free space",
    errno.EDQUOT: "the disk quota is exhausted: free space",
    errno.EFBIG: "the file-size limit (ulimit -f) was reached: raise it",
    errno.EROFS: "the file system is read-only: choose a writable trainer.data_dir / --out",
    errno.EACCES: "permission denied: fix the permissions or choose another trainer.data_dir / --out",
    errno.EPERM: "operation not permitted: fix the folder's permissions or choose another folder",
    errno.ENOMEM: "out of memory: lower trainer.num_envs, trainer.buffer_size or the batch size",
}


def describe(exc: BaseException, resume_command: str | None = None) -> tuple[int, str]:
    """``(exit code, one line)`` for ``exc``; ``resume_command`` is offered where a resume helps."""
    kinds = {cls.__name__ for cls in type(exc).__mro__}  # by name: a params error imports no torch
    resume = f"; resume with: {resume_command}" if resume_command else ""
    if "Interrupted" in kinds:  # rlpipe.trainer.signals.Interrupted
        return 128 + int(getattr(exc, "signum", 2)), f"{exc}{resume}"
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted (SIGINT)"
    if "RefusedDataError" in kinds:  # rlpipe.refused.RefusedDataError and its kin
        return REFUSED_DATA, _first_line(exc)
    if kinds & {"WriterDiedError", "WriterTimeoutError"}:  # rlpipe.artifacts: a socket error is no cause
        return RUNTIME, f"{_first_line(exc)}{resume}"
    if (os_error := _os_error(exc)) is not None:
        return RUNTIME, _os_message(os_error, exc, resume)
    if isinstance(exc, MemoryError) or _is_cuda_oom(exc):
        return RUNTIME, (
            f"out of memory ({_first_line(exc)[:120]}); lower trainer.num_envs, "
            f"trainer.buffer_size or algorithm.cfg.batch_size{resume}"
        )
    if isinstance(exc, ValueError | FileNotFoundError):
        return BAD_INPUT, _first_line(exc)
    if _is_tracking_failure(exc):
        return RUNTIME, (
            f"MLflow tracking store failed ({type(exc).__name__}: {_first_line(exc)[:200]}); "
            "check tracking.uri or set tracking.backend: none"
        )
    if type(exc).__name__ == "LockedError":
        return RUNTIME, _first_line(exc)
    return RUNTIME, f"{type(exc).__name__}: {_first_line(exc)} (rlpipe --debug … shows the traceback)"


def bounded(line: str, limit: int = MAX_LINE) -> str:
    """``line`` cut to at most ``limit`` characters: its head and tail around ``… (N characters left out) …``.

    The head names the key or file and the tail says what to do, so both are kept; a line within
    ``limit`` is returned as it is.
    """
    if len(line) <= limit:
        return line
    marker = f" … ({len(line)} characters left out) … "  # at least as long as the final marker
    keep = max(0, limit - len(marker))
    head = keep - keep // 3
    tail = keep - head
    left_out = len(line) - head - tail
    return f"{line[:head]} … ({left_out} characters left out) … {line[len(line) - tail :]}"


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _os_error(exc: BaseException) -> OSError | None:
    """The ``OSError`` behind ``exc`` (itself, or its cause chain), unless it is a missing input file."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, OSError) and not isinstance(node, FileNotFoundError | IsADirectoryError):
            return node if node.errno is not None else None
        node = node.__cause__ or (node.__context__ if not node.__suppress_context__ else None)
    return None


def _os_message(error: OSError, exc: BaseException, resume: str) -> str:
    where = error.filename or _filename_in(exc) or "a file"
    advice = _OS_ADVICE.get(error.errno or 0, error.strerror or "operating-system error")
    return f"{where}: {error.strerror or error} — {advice}{', then retry' if not resume else ''}{resume}"


def _filename_in(exc: BaseException) -> str | None:
    text = _first_line(exc)
    head = text.split(": ", 1)[0]
    return head.removeprefix("writing ").removesuffix(" failed") if "/" in head else None


def _is_cuda_oom(exc: BaseException) -> bool:
    named = type(exc).__name__ == "OutOfMemoryError"  # torch.OutOfMemoryError (CUDA/MPS)
    return named or (isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()[:400])


def _is_tracking_failure(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("mlflow", "sqlite3", "sqlalchemy"))

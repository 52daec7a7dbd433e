"""Events at the stage boundaries of the online loop: user code that sees a small context.

Event names, in the order they fire in one run::

    run_start        once, before the first collect (after a resume: at the resumed iteration)
    after_collect    every iteration, with ``ctx.rollout`` (the ``[N, T+1]`` TensorDict, before the update)
    after_update     every iteration, with ``ctx.metrics`` (the iteration's metrics so far)
    after_eval       after each evaluation, with ``ctx.metrics``
    after_checkpoint after each checkpoint, with ``ctx.checkpoint`` (its path)
    run_end          once, with the run's summary in ``ctx.metrics``
    eval_step        every env step of an evaluation (only when a handler asks for it)

A handler is a function ``handler(ctx, **params)`` or a :class:`Callback` object with ``on_<event>``
methods. Returning ``False`` stops the run cleanly after the current iteration (a checkpoint is
written, the run ends with exit code 0); ``ctx.log(key, value)`` adds a metric to the iteration's row,
``curve.csv`` and MLflow. A handler that raises stops the run with an :class:`EventError` naming it.
With no handler registered nothing is called and nothing is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlpipe.config import ConfigError, EventsCfg
from rlpipe.config.references import import_module
from rlpipe.location import AnyPath

if TYPE_CHECKING:
    from tensordict import TensorDict

    from rlpipe.envs import BatchedEnv

__all__ = ["EVENTS", "Callback", "EventContext", "EventError", "Events", "resolve_function"]

EVENTS = (
    "run_start",
    "after_collect",
    "after_update",
    "after_eval",
    "after_checkpoint",
    "run_end",
    "eval_step",
)


class EventError(RuntimeError):
    """A handler raised: the one-line message names the handler and the event."""


@dataclass
class EventContext:
    """What a handler sees: where the run stands, never the trainer's internals."""

    event: str
    iteration: int
    env_steps: int
    run_dir: AnyPath
    env: BatchedEnv | None = None
    """The env of this event: the training env, or the eval env for ``after_eval``/``eval_step``."""
    metrics: dict[str, float] = field(default_factory=dict)
    rollout: TensorDict | None = None
    checkpoint: Path | None = None
    logged: dict[str, float] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)
    """``{metric: header}`` of the metrics that asked for a console column."""

    def log(self, key: str, value: float, column: str | None = None) -> None:
        """Add ``key`` to this iteration's metrics (``curve.csv``, MLflow; the console row with ``column``).

        ``column``: the header of a console column showing ``key`` from now on (the fixed columns
        come first; the header is printed again when a column joins).
        """
        self.logged[key] = float(value)
        if column is not None:
            self.columns[key] = column


class Callback:
    """Base of callback objects: override the ``on_<event>`` methods you need (SB3-style)."""

    def on_run_start(self, ctx: EventContext) -> bool | None:
        """Once, before the first collect."""

    def on_after_collect(self, ctx: EventContext) -> bool | None:
        """After each collect, with ``ctx.rollout``."""

    def on_after_update(self, ctx: EventContext) -> bool | None:
        """After each update, with ``ctx.metrics``."""

    def on_after_eval(self, ctx: EventContext) -> bool | None:
        """After each evaluation."""

    def on_after_checkpoint(self, ctx: EventContext) -> bool | None:
        """After each checkpoint, with ``ctx.checkpoint``."""

    def on_run_end(self, ctx: EventContext) -> bool | None:
        """Once, at the end, with the summary."""


@dataclass
class _Handler:
    name: str
    func: Callable[..., Any]
    every: int = 1
    params: dict[str, Any] = field(default_factory=dict)
    calls: int = 0


class Events:
    """The registered handlers, by event; ``fire`` calls those whose interval is due."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[_Handler]] = {}

    def __bool__(self) -> bool:
        return bool(self._handlers)

    def wants(self, event: str) -> bool:
        """Whether any handler listens to ``event`` (the loop skips building a context otherwise)."""
        return event in self._handlers

    def add(
        self,
        event: str,
        handler: Callable[..., Any],
        *,
        every: int = 1,
        name: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        """Call ``handler(ctx, **params)`` at every ``every``-th ``event``.

        ``name`` names the handler in errors (default: the function's qualified name, or the class
        of a callable object); ``params`` are the handler's own keyword arguments, kept apart from
        these, so a handler may take a ``name`` or ``every`` of its own.
        """
        where = f"event {event!r}" + (f" (handler {name!r})" if name else "")
        if event not in EVENTS:
            raise ConfigError(f"{where} is not known; accepted: {', '.join(EVENTS)}")
        if every < 1:
            raise ConfigError(f"{where}: every must be >= 1 (got {every})")
        if not callable(handler):
            raise ConfigError(f"{where}: the handler is a {type(handler).__name__}, not a callable")
        label = name or getattr(handler, "__qualname__", None) or type(handler).__qualname__
        self._handlers.setdefault(event, []).append(_Handler(label, handler, every, dict(params or {})))

    def add_callback(self, callback: Callback) -> None:
        """Register every ``on_<event>`` method ``callback`` overrides."""
        for event in EVENTS:
            method = getattr(callback, f"on_{event}", None)
            if method is not None and getattr(type(callback), f"on_{event}", None) is not getattr(
                Callback, f"on_{event}", None
            ):
                self.add(event, method, name=f"{type(callback).__name__}.on_{event}")

    def add_config(self, cfg: EventsCfg) -> None:
        """Register the ``trainer.events`` block: ``train`` after each update, ``eval`` at eval steps."""
        for section, interval_event in (("train", "after_update"), ("eval", "eval_step")):
            for name, event in getattr(cfg, section).items():
                func = resolve_function(event.func, f"trainer.events.{section}.{name}.func")
                when = "run_start" if event.mode == "startup" and section == "train" else interval_event
                if event.mode == "startup" and section == "eval":
                    when = "after_eval"
                self.add(when, func, every=event.interval_step, name=name, params=event.params)

    def fire(self, ctx: EventContext) -> bool:
        """Call the due handlers of ``ctx.event``; ``False`` when one asked the run to stop."""
        keep_going = True
        for handler in self._handlers.get(ctx.event, ()):
            handler.calls += 1
            if (handler.calls - 1) % handler.every:
                continue
            try:
                result = handler.func(ctx, **handler.params)
            except Exception as exc:
                raise EventError(
                    f"event handler {handler.name} failed at {ctx.event} "
                    f"(iteration {ctx.iteration}): {type(exc).__name__}: {exc}"
                ) from exc
            keep_going &= result is not False
        return keep_going


def resolve_function(spec: str, key: str) -> Callable[..., Any]:
    """``package.module:function`` (or a built-in event function's name) → the function.

    Imported from the installed packages and ``PYTHONPATH`` when the run is built, never at load.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, attr = "rlpipe.trainer.builtin_events", spec
    func = getattr(import_module(module_name, key), attr, None)
    if not callable(func):
        accepted = "package.module:function" if sep else "a built-in event (rlpipe.trainer.builtin_events)"
        raise ConfigError(f"{key}: {spec!r} is not a function; accepted: {accepted}")
    return func

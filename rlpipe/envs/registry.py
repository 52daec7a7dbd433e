"""Env registry: ``@register_env("Name")`` adds a torch env, ``build_env`` builds ``env.id``.

``build_env(id, num_envs, device, cfg, backend)`` resolves ``id`` in this order (``backend:
auto``; another backend looks in its own place only): ``module:attr`` plugins
(:mod:`rlpipe.envs.backends.plugins`), the registered torch envs, the ``rlpipe.envs`` entry points,
gymnasium ids with a vectorized class of their own such as CartPole-v1
(:class:`~rlpipe.envs.backends.gym_vector.GymnasiumVectorEnv`), envpool's ids
(:class:`~rlpipe.envs.backends.envpool_env.EnvpoolEnv`), gymnasium's registry
(:class:`~rlpipe.envs.backends.gym_adapter.GymnasiumEnv`); ``backend: mjlab`` builds an mjlab task
(:mod:`rlpipe.envs.backends.mjlab_env`). Every user mistake becomes a one-line
:class:`~rlpipe.config.ConfigError` naming the key path (``env.id`` or ``env.cfg.<key>``) and what
is accepted.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium
import torch

from rlpipe.config import ConfigError
from rlpipe.config.errors import did_you_mean
from rlpipe.envs.backends.gym_adapter import VECTORIZATION_MODES, GymnasiumEnv
from rlpipe.envs.backends.gym_vector import GymnasiumVectorEnv, native_vector_class, native_vector_type
from rlpipe.envs.backends.plugins import build_plugin_env, entry_point_ids, is_plugin_id
from rlpipe.envs.base import BatchedEnv
from rlpipe.envs.ids import BUILTIN_ENVS, BUILTIN_NEEDS, shipped_envpool_ids
from rlpipe.envs.rendering import RenderUnavailable, gl_errors, gl_unavailable
from rlpipe.extras import VIDEO, is_installed, require, require_all

__all__ = ["BACKENDS", "build_env", "build_eval_env", "register_env", "registered_env_ids"]

BACKENDS = ("auto", "torch", "envpool", "gymnasium", "mjlab", "isaaclab")

EnvT = TypeVar("EnvT", bound=type[BatchedEnv])

NATIVE = "vector_entry_point"
"""``env.cfg.vectorization_mode`` of gymnasium's own vectorized classes (``backends.gym_vector``)."""
GYMNASIUM_MODES = (NATIVE, *VECTORIZATION_MODES)

_REGISTRY: dict[str, type[BatchedEnv]] = {}
_SET_BY_TRAINER = {"num_envs": "trainer.num_envs", "device": "trainer.device", "env_id": "env.id"}
"""Constructor arguments that ``build_env`` fills itself, with the key that sets them."""


def register_env(name: str, *, override: bool = False) -> Callable[[EnvT], EnvT]:
    """Class decorator: make ``name`` an ``env.id`` building this env class.

    A second registration of ``name`` raises ValueError unless ``override=True``.
    """

    def decorate(cls: EnvT) -> EnvT:
        if name in _REGISTRY and not override:
            raise ValueError(
                f"env {name!r} is already registered ({_REGISTRY[name].__qualname__}); "
                "pass override=True to replace it"
            )
        _REGISTRY[name] = cls
        return cls

    return decorate


def _import_builtins(env_id: str | None = None) -> None:
    """Register rlpipe's own torch envs (importing their modules runs ``@register_env``).

    ``env_id``: only the module of that built-in id (none for another id): PushCube's imports
    MuJoCo, a slow import a CartPole run does not need; its optional packages missing, a one-line
    ``ConfigError`` names the extra. Without ``env_id``, every built-in whose packages are installed.
    """
    if env_id is None:
        ids = [i for i in BUILTIN_ENVS if all(is_installed(m) for m in BUILTIN_NEEDS.get(i, ()))]
    else:
        ids = [env_id] if env_id in BUILTIN_ENVS else []
        require_all(BUILTIN_NEEDS.get(env_id, ()), f"env.id: {env_id}")
    for builtin in ids:
        importlib.import_module(BUILTIN_ENVS[builtin])


def registered_env_ids() -> list[str]:
    """Names of the registered torch envs, sorted."""
    _import_builtins()
    return sorted(_REGISTRY)


def build_env(
    env_id: str,
    num_envs: int,
    device: torch.device | str,
    cfg: dict[str, Any] | None = None,
    backend: str = "auto",
    render: bool = False,
) -> BatchedEnv:
    """Build ``num_envs`` envs of ``env_id`` on ``device`` with constructor arguments ``cfg``.

    A registered torch env gets ``cls(num_envs=..., device=..., **cfg)``; an envpool id gets
    ``EnvpoolEnv(env_id, num_envs, device, **cfg)`` (``mode``, ``num_threads``, ``resume``,
    ``success_key`` and envpool's own config keys such as ``max_episode_steps``); a gymnasium id
    with a vectorized class of its own (CartPole-v1; under ``auto`` before envpool) gets
    ``GymnasiumVectorEnv(env_id, num_envs, device, **cfg)`` (that class's kwargs); any other id
    known to gymnasium, or ``vectorization_mode: sync | async``, gets ``GymnasiumEnv(env_id,
    num_envs, device, **cfg)`` (``cfg`` then holds ``vectorization_mode`` and ``gymnasium.make``
    kwargs). Raises ConfigError on an unknown id or
    backend, an unknown argument or an invalid value. ``render=True`` (eval videos) makes a
    gymnasium env with ``render_mode="rgb_array"`` (unless ``cfg`` sets one), vectorized in-process
    (``sync``); torch envs draw themselves, envpool envs cannot.
    """
    cfg = dict(cfg or {})
    if backend not in BACKENDS:
        raise ConfigError(f"env.backend: got {backend!r}; accepted: {', '.join(BACKENDS)}")
    if backend == "mjlab":  # an mjlab task id; mjlab is imported only here
        from rlpipe.envs.backends.mjlab_env import build_mjlab_env

        return build_mjlab_env(env_id, num_envs, device, cfg)
    if backend == "isaaclab":
        return _isaaclab(env_id, num_envs, device, cfg)
    _import_builtins(env_id)
    if is_plugin_id(env_id):
        return build_plugin_env(
            env_id, num_envs, device, cfg, lambda gym_id: _gymnasium(gym_id, num_envs, device, cfg)
        )
    if backend in ("auto", "torch") and env_id in _REGISTRY:
        cls = _REGISTRY[env_id]
        _check_arguments(env_id, cls, cfg)
        return _construct_registered(cls, num_envs, device, cfg)
    if backend == "auto" and env_id in entry_point_ids():
        return build_env(entry_point_ids()[env_id], num_envs, device, cfg)
    if backend == "auto" and (
        _prefers_native_vector(env_id, cfg)
        or ("vectorization_mode" in cfg and env_id in gymnasium.envs.registry)
    ):
        return _gymnasium(env_id, num_envs, device, cfg, render)  # (a vectorization_mode is gymnasium's)
    if backend in ("auto", "envpool") and _envpool_knows(env_id, required=backend == "envpool"):
        return _envpool(env_id, num_envs, device, cfg)
    if backend in ("auto", "gymnasium") and env_id in gymnasium.envs.registry:
        return _gymnasium(env_id, num_envs, device, cfg, render)
    raise ConfigError(_unknown(env_id, backend))


def _unknown(env_id: str, backend: str) -> str:
    where = {
        "torch": f"a registered torch env ({', '.join(registered_env_ids())})",
        "envpool": "an envpool id such as HalfCheetah-v5 (rlpipe envs --backend envpool)",
        "gymnasium": "a gymnasium id such as CartPole-v1",
    }
    accepted = [where[backend]] if backend != "auto" else [*where.values(), "package.module:Factory"]
    known = [*registered_env_ids(), *(gymnasium.envs.registry if backend in ("auto", "gymnasium") else ())]
    return (
        f"env.id: unknown env {env_id!r} for backend {backend}{did_you_mean(env_id, known)}; "
        f"accepted: {'; '.join(accepted)}"
    )


def _prefers_native_vector(env_id: str, cfg: dict[str, Any]) -> bool:
    """``auto``: gymnasium's own vectorized class before envpool where the id has one.

    It is the faster of the two through rlpipe's adapters (measured by
    ``benchmarks/speed/cartpole_step.py``), unless ``cfg`` holds keys only another backend takes.
    """
    cls = native_vector_type(env_id)
    if cls is None or cfg.get("vectorization_mode", NATIVE) != NATIVE:
        return False
    try:
        _check_arguments(env_id, cls, _without_mode(cfg))
    except ConfigError:
        return False
    return True


def _envpool_knows(env_id: str, required: bool) -> bool:
    """True when envpool makes ``env_id``.

    Without envpool installed, an id of envpool's (the list rlpipe ships) or ``required``
    (``env.backend: envpool``) is a one-line ConfigError naming the extra: the same params pick
    the same simulator everywhere, or fail.
    """
    if is_installed("envpool"):
        from rlpipe.envs.backends.envpool_env import envpool_ids

        return env_id in envpool_ids()
    if required:
        require("envpool", "env.backend: envpool")
    if env_id in shipped_envpool_ids():
        require("envpool", f"env.id: {env_id}")
    return False


def _isaaclab(env_id: str, num_envs: int, device: torch.device | str, cfg: dict[str, Any]) -> BatchedEnv:
    """An Isaac Lab task (:mod:`rlpipe.envs.backends.isaaclab_env`, imported only for this backend)."""
    from rlpipe.envs.backends.isaaclab_env import build_isaaclab_env

    return build_isaaclab_env(env_id, num_envs, device, cfg)


def _envpool(env_id: str, num_envs: int, device: torch.device | str, cfg: dict[str, Any]) -> BatchedEnv:
    from rlpipe.envs.backends.envpool_env import EnvpoolEnv

    _check_arguments(env_id, EnvpoolEnv, cfg)
    make = lambda: EnvpoolEnv(env_id, num_envs, device, **cfg)
    return _construct(make, cfg, make_kwargs_of=f"envpool:{env_id}")


def _construct_registered(
    cls: Callable[..., BatchedEnv], num_envs: int, device: torch.device | str, cfg: dict[str, Any]
) -> BatchedEnv:
    """A registered class built as ``register_env`` promises: ``cls(num_envs=, device=, **env.cfg)``."""
    return _construct(lambda: cls(num_envs=num_envs, device=device, **cfg), cfg)


def _gymnasium(
    env_id: str, num_envs: int, device: torch.device | str, cfg: dict[str, Any], render: bool = False
) -> BatchedEnv:
    """A gymnasium id: its own vectorized class where it has one (as ``gymnasium.make_vec`` picks), else sync.

    ``env.cfg.vectorization_mode`` chooses: ``vector_entry_point`` (the default where
    :func:`~rlpipe.envs.backends.gym_vector.native_vector_class` knows the id), ``sync`` or ``async``. Eval
    videos run ``sync`` (each sub-env draws its own frames), except under ``vector_entry_point``:
    that env does not draw, so the eval episodes stay those of the run without video.
    """
    mode = cfg.get("vectorization_mode")
    if mode not in (None, *GYMNASIUM_MODES):
        raise ConfigError(f"env.cfg.vectorization_mode: got {mode!r}; accepted: {', '.join(GYMNASIUM_MODES)}")
    if mode == NATIVE or (mode is None and native_vector_class(env_id)):
        return _native_vector(env_id, num_envs, device, cfg)
    _check_arguments(env_id, GymnasiumEnv, cfg)
    if render:  # sync: each sub-env draws in this process, only when asked to
        cfg = {**cfg, "render_mode": cfg.get("render_mode", "rgb_array"), "vectorization_mode": "sync"}
    make = lambda: GymnasiumEnv(env_id, num_envs, device, **cfg)
    if not render:
        return _construct(make, cfg, make_kwargs_of=env_id)
    try:  # a renderer that needs OpenGL may fail while the env is made
        return _construct(make, cfg, make_kwargs_of=env_id)
    except gl_errors() as exc:
        raise gl_unavailable(f"making {env_id} with render_mode='rgb_array'", exc) from None


def _native_vector(env_id: str, num_envs: int, device: torch.device | str, cfg: dict[str, Any]) -> BatchedEnv:
    kwargs = _without_mode(cfg)
    cls = native_vector_type(env_id)
    if cls is not None:  # else GymnasiumVectorEnv names the ids that have one
        _check_arguments(env_id, cls, kwargs)
    return _construct(
        lambda: GymnasiumVectorEnv(env_id, num_envs, device, **kwargs), cfg, make_kwargs_of=env_id
    )


def _without_mode(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` without ``vectorization_mode`` (the adapter's choice, not a constructor argument)."""
    return {key: value for key, value in cfg.items() if key != "vectorization_mode"}


def build_eval_env(
    env_id: str,
    num_envs: int,
    device: torch.device | str,
    cfg: dict[str, Any] | None,
    video: bool,
    backend: str = "auto",
) -> tuple[BatchedEnv, RenderUnavailable | None]:
    """The eval env: with ``video``, one built to draw; when that fails, a plain one and the reason.

    ``video`` without the video extra installed is a one-line ConfigError, before any env exists.
    """
    if video:
        require_all(VIDEO, "eval.video")
        try:
            return build_env(env_id, num_envs, device, cfg, backend, render=True), None
        except RenderUnavailable as exc:
            return build_env(env_id, num_envs, device, cfg, backend), exc
    return build_env(env_id, num_envs, device, cfg, backend), None


def _check_arguments(env_id: str, cls: type[BatchedEnv], cfg: dict[str, Any]) -> None:
    """Refuse keys of ``cfg`` that the constructor of ``cls`` does not take (or takes elsewhere)."""
    params = inspect.signature(cls.__init__).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [
        name
        for name, p in params.items()
        if name != "self"
        and name not in _SET_BY_TRAINER
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    for key in cfg:
        if key in _SET_BY_TRAINER:
            raise ConfigError(f"env.cfg.{key}: set by {_SET_BY_TRAINER[key]}, not env.cfg")
        if key not in named and not accepts_any:
            raise ConfigError(f"env.cfg.{key}: unknown argument of {env_id}; accepted: {', '.join(named)}")


def _construct(
    make: Callable[[], BatchedEnv], cfg: dict[str, Any], make_kwargs_of: str | None = None
) -> BatchedEnv:
    """Call ``make``; a ValueError ``"<key>[.<sub>]: …"`` about a ``cfg`` key becomes a ConfigError.

    With ``make_kwargs_of`` (a gymnasium id), a TypeError — a ``gymnasium.make`` kwarg that env
    does not take — becomes an ``env.cfg: …`` ConfigError too. Anything else propagates.
    """
    try:
        return make()
    except ConfigError:
        raise
    except ValueError as exc:
        message = _first_line(exc)
        if message.partition(":")[0].partition(".")[0] in cfg:  # "key: …" or "key.sub: …"
            raise ConfigError(f"env.cfg.{message}") from None
        raise
    except TypeError as exc:
        if make_kwargs_of is None:
            raise
        maker = (
            f"envpool.make({make_kwargs_of.removeprefix('envpool:')!r})"
            if make_kwargs_of.startswith("envpool:")
            else f"gymnasium.make({make_kwargs_of!r})"
        )
        raise ConfigError(f"env.cfg: {_first_line(exc)} (kwargs of {maker})") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

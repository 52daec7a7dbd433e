"""The registry: ``algorithm.name`` and ``policy.name`` → the code they name, resolved like ``env.id``.

A name resolves one way (:func:`rlpipe.config.references.resolve_name`): ``package.module:Class``
itself, a built-in name (:data:`BUILTIN_ALGORITHMS`, :data:`BUILTIN_POLICIES`: one line per
built-in, naming its module), or an entry point of the group ``rlpipe.algorithms`` /
``rlpipe.policies`` of an installed package. The module is imported from the installed packages
and ``PYTHONPATH`` only, by the command that runs it; a describing command (``rlpipe inspect``)
imports nothing (:func:`describing`) and says which module a run needs (:func:`code_of`).

An algorithm class names its config class (``cfg_class``); the ``algorithm`` block is validated
against it at load (:mod:`rlpipe.config.algorithm_block`). A built-in's config class is torch-free
and named beside it, so its params are checked before torch loads; its algorithm class is imported
when the algorithm is built, by the path a plug-in takes. ``rlpipe.algorithms.register_algo``
adds a class defined in a script (the Python API) to the same table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from rlpipe.config.algorithms import AlgorithmCfg
from rlpipe.config.errors import ConfigError
from rlpipe.config.references import entry_point_targets, is_reference, load_target, resolve_name

__all__ = [
    "CLASS_FORM",
    "ALGORITHM_GROUP",
    "BUILTIN_ALGORITHMS",
    "BUILTIN_POLICIES",
    "POLICY_GROUP",
    "Builtin",
    "Registered",
    "algorithm_key",
    "algorithm_names",
    "code_of",
    "describing",
    "is_describing",
    "policy_names",
    "policy_reference",
    "register_algorithm",
    "registered",
]

ALGORITHM_GROUP = "rlpipe.algorithms"
"""Installed packages add algorithm names through this entry-point group (``name = module:Class``)."""
POLICY_GROUP = "rlpipe.policies"
"""Installed packages add policy names through this entry-point group (``name = module:Class``)."""
CLASS_FORM = "package.module:Class"
"""How ``algorithm.name`` and ``policy.name`` name a class of their own."""


@dataclass(frozen=True)
class Builtin:
    """A built-in algorithm: its class and its (torch-free) config class, as ``module:Class``."""

    algorithm: str
    config: str


BUILTIN_ALGORITHMS = {
    "ppo": Builtin("rlpipe.algorithms.ppo:PPO", "rlpipe.config.algorithms:PPOCfg"),
    "grpo": Builtin("rlpipe.algorithms.grpo:GRPO", "rlpipe.config.algorithms:GRPOCfg"),
    "distillation": Builtin(
        "rlpipe.algorithms.distillation:Distillation", "rlpipe.config.distillation:DistillationCfg"
    ),
    "sac": Builtin("rlpipe.algorithms.sac:SAC", "rlpipe.config.offpolicy:SACCfg"),
    "td3": Builtin("rlpipe.algorithms.td3:TD3", "rlpipe.config.offpolicy:TD3Cfg"),
}
"""The algorithms rlpipe ships: resolved, imported and validated like a plug-in's ``module:Class``."""
BUILTIN_POLICIES = {
    "actor_critic": "rlpipe.policies.actor_critic:ActorCritic",
    "actor_only": "rlpipe.policies.actor_critic:ActorOnly",
    "recurrent_actor_critic": "rlpipe.policies.recurrent:RecurrentActorCritic",
}
"""The policies rlpipe ships, by ``module:Class``."""


@dataclass(frozen=True)
class Registered:
    """One algorithm name: its config class and its class (imported from ``reference`` when first built)."""

    cfg_class: type[AlgorithmCfg]
    algo: type | None = None
    reference: str | None = None


_REGISTRY: dict[str, Registered] = {}
_DESCRIBING: ContextVar[bool] = ContextVar("describing", default=False)


@contextmanager
def describing() -> Iterator[None]:
    """Params loaded inside import no plug-in: an unresolved ``algorithm.name`` keeps its ``cfg`` as written.

    For commands that describe a run without running its code (``rlpipe inspect``).
    """
    token = _DESCRIBING.set(True)
    try:
        yield
    finally:
        _DESCRIBING.reset(token)


def is_describing() -> bool:
    """True inside :func:`describing`."""
    return _DESCRIBING.get()


def algorithm_key(name: str) -> str:
    """The table's key of ``name``: ``module:Class`` as written, any other name in lower case."""
    return name if is_reference(name) else name.lower()


def register_algorithm(
    name: str, cfg_class: type[AlgorithmCfg], algo: type | None = None, reference: str | None = None
) -> None:
    """Make ``name`` an ``algorithm.name`` whose ``cfg`` is a ``cfg_class``, built by ``algo``.

    ``reference``: the ``module:Class`` imported for ``algo`` when the algorithm is first built. A
    name holds one config class and one algorithm class: registering another raises ``ValueError``.
    """
    if not (isinstance(cfg_class, type) and issubclass(cfg_class, AlgorithmCfg)):
        raise ValueError(f"algorithm {name!r}: cfg_class must subclass AlgorithmCfg (got {cfg_class!r})")
    key = algorithm_key(name)
    known = _REGISTRY.get(key) or (_resolved(key) if key in BUILTIN_ALGORITHMS else None)
    if known is not None:
        if known.cfg_class is not cfg_class:
            raise ValueError(f"algorithm {name!r} is already registered with {known.cfg_class.__name__}")
        if known.algo is not None and algo is not None and known.algo is not algo:
            raise ValueError(f"algorithm {name!r} is already registered by {known.algo.__name__}")
    _REGISTRY[key] = Registered(cfg_class, algo or (known and known.algo), reference)


def algorithm_names() -> list[str]:
    """The names ``algorithm.name`` accepts besides ``module:Class``: built-ins, entry points, registered."""
    found = {*BUILTIN_ALGORITHMS, *(n.lower() for n in entry_point_targets(ALGORITHM_GROUP)), *_REGISTRY}
    return sorted(name for name in found if not is_reference(name))


def registered(name: str) -> Registered:
    """The entry of ``name`` (any case), resolved and imported at first use.

    A name that resolves to nothing is a one-line ``ConfigError`` naming the accepted names; a module
    that does not import, or lacks the class, one naming the module and what to do.
    """
    key = algorithm_key(name)
    return _REGISTRY.get(key) or _resolved(key)


def _resolved(key: str) -> Registered:
    """Resolve ``key`` (built-in, entry point or ``module:Class``) and add it to the table."""
    builtins = {name: builtin.algorithm for name, builtin in BUILTIN_ALGORITHMS.items()}
    reference = resolve_name(key, builtins, ALGORITHM_GROUP, fold_case=True)
    if reference is None:
        raise ConfigError(
            f"algorithm.name: unknown algorithm {key!r}; accepted: {', '.join(algorithm_names())}, "
            f"an {ALGORITHM_GROUP} entry point or {CLASS_FORM}"
        )
    builtin = BUILTIN_ALGORITHMS.get(key)
    if builtin is not None:  # the config class without the algorithm's torch
        cfg_class, algo = load_target(builtin.config, "algorithm.name", CLASS_FORM), None
    else:
        algo = load_target(reference, "algorithm.name", CLASS_FORM)
        cfg_class = config_class_of(algo, reference)
    _REGISTRY[key] = Registered(cfg_class, algo, reference)  # pyright: ignore[reportArgumentType]  # checked
    return _REGISTRY[key]


def config_class_of(algo: object, reference: str) -> type[AlgorithmCfg]:
    """``algo.cfg_class``: the config class an algorithm class names; a ``ConfigError`` otherwise."""
    cfg_class = getattr(algo, "cfg_class", None)
    if isinstance(algo, type) and isinstance(cfg_class, type) and issubclass(cfg_class, AlgorithmCfg):
        return cfg_class
    raise ConfigError(
        f"algorithm.name: {reference} is not an algorithm class; accepted: a BaseAlgorithm "
        "subclass whose cfg_class is its config class (an UpdateCfg subclass)"
    )


def policy_reference(name: str) -> str | None:
    """The ``module:Class`` ``policy.name`` stands for (nothing imported); ``None`` when unknown."""
    return resolve_name(name, BUILTIN_POLICIES, POLICY_GROUP)


def policy_names() -> list[str]:
    """The names ``policy.name`` accepts besides ``module:Class``: built-ins and entry points."""
    return sorted({*BUILTIN_POLICIES, *entry_point_targets(POLICY_GROUP)})


def code_of(algorithm: str, policy: str) -> dict[str, str]:
    """``{"algorithm"|"policy": "module:Class"}`` of the names that are not rlpipe's own (nothing imported).

    A name that resolves to nothing keeps its name: the run cannot be rebuilt here as it is.
    """
    found = {}
    if algorithm_key(algorithm) not in BUILTIN_ALGORITHMS:
        found["algorithm"] = resolve_name(algorithm_key(algorithm), {}, ALGORITHM_GROUP, fold_case=True)
    if policy not in BUILTIN_POLICIES:
        found["policy"] = policy_reference(policy)
    names = {"algorithm": algorithm, "policy": policy}
    return {what: reference or names[what] for what, reference in found.items()}

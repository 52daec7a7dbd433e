"""The algorithm registry: ``algorithm.name`` → its config class and, once imported, its class.

One table serves both floors. ``rlpipe.config`` validates the ``algorithm: {name, cfg}`` block once,
at load, as a pydantic discriminated union on ``name`` with one block class per registered name
(``cfg`` typed by that algorithm's config class: ``PPOCfg``, ``GRPOCfg``), without importing torch.
``rlpipe.algorithms.register_algo`` adds the algorithm class to the entry of its name, and
``build_algo`` reads it from here. A user algorithm registered before the params are loaded
(``@register_algo("mine")`` on a class whose ``cfg_class`` is its own config class) loads from params
like the built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, Union

from pydantic import (
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    SerializationInfo,
    Tag,
    TypeAdapter,
    ValidationError,
    create_model,
    field_serializer,
    model_validator,
)

from rlpipe.config.algorithms import AlgorithmCfg, GRPOCfg, PPOCfg
from rlpipe.config.distillation import DistillationCfg
from rlpipe.config.errors import ConfigError, field_model, format_validation_error, located_error, unknown_key
from rlpipe.config.strict import StrictModel

__all__ = [
    "AlgorithmBlock",
    "GRPOBlock",
    "PPOBlock",
    "Registered",
    "algorithm_names",
    "register_algorithm",
    "registered",
    "replay_algorithm",
    "validate_algorithm",
]

DEFAULT = "ppo"
"""``algorithm.name`` when the block leaves it out."""


class AlgorithmBlock(StrictModel):
    """``{name, cfg}``: the algorithm and its hyperparameters, typed by the algorithm's config class.

    Validating this base class validates the union: ``AlgorithmBlock.model_validate({"name": "ppo",
    "cfg": {...}})`` returns the ``ppo`` block, whose ``cfg`` is a ``PPOCfg``.
    """

    name: str = DEFAULT
    """Registered algorithm name (``ppo``, ``grpo``, or one added with ``register_algo``), any case."""
    cfg: AlgorithmCfg = Field(default_factory=AlgorithmCfg)
    """Hyperparameters, validated by the algorithm's config class (``PPOCfg``, ``GRPOCfg``)."""

    @model_validator(mode="wrap")
    @classmethod
    def _by_name(cls, data: object, handler: ModelWrapValidatorHandler[AlgorithmBlock]) -> AlgorithmBlock:
        """The base class dispatches to the block of ``name``; a registered block validates itself."""
        return handler(data) if cls is not AlgorithmBlock else validate_algorithm(data)

    def __new__(cls, *args: object, **data: object) -> AlgorithmBlock:
        """``AlgorithmBlock(name=..., cfg=...)`` is the registered block of ``name``, as in validation."""
        if cls is AlgorithmBlock:
            return validate_algorithm(data)
        return super().__new__(cls)

    @field_serializer("cfg")
    def _keys_as_given(self, cfg: AlgorithmCfg, info: SerializationInfo) -> dict[str, Any]:
        """The keys the params set, as in the params file (defaults stay implicit, as there)."""
        return cfg.model_dump(mode=info.mode, exclude_unset=True)


class PPOBlock(AlgorithmBlock):
    """``algorithm: {name: ppo, cfg: PPOCfg}``."""

    name: Literal["ppo"] = "ppo"
    """``ppo``."""
    cfg: PPOCfg = Field(default_factory=PPOCfg)
    """PPO's hyperparameters."""


class GRPOBlock(AlgorithmBlock):
    """``algorithm: {name: grpo, cfg: GRPOCfg}``."""

    name: Literal["grpo"] = "grpo"
    """``grpo``."""
    cfg: GRPOCfg = Field(default_factory=GRPOCfg)
    """GRPO's hyperparameters."""


@dataclass(frozen=True)
class Registered:
    """One algorithm: its config class, its block class in the union and its class (once imported)."""

    cfg_class: type[AlgorithmCfg]
    block: type[AlgorithmBlock]
    algo: type | None = None


_REGISTRY: dict[str, Registered] = {}
_UNION: list[TypeAdapter[AlgorithmBlock]] = []
"""The discriminated union of the registered blocks, built at first use after each registration."""


def register_algorithm(
    name: str,
    cfg_class: type[AlgorithmCfg],
    algo: type | None = None,
    block: type[AlgorithmBlock] | None = None,
) -> None:
    """Make ``name`` an ``algorithm.name`` whose ``cfg`` is a ``cfg_class``; ``algo`` builds it.

    ``block``: the union's class of this name (made from ``name`` and ``cfg_class`` when not given).

    The built-in names are registered here with their config classes (torch-free); the algorithm
    classes join them when ``rlpipe.algorithms`` is imported. A name holds one config class and one
    algorithm class: registering another raises ``ValueError``.
    """
    if not (isinstance(cfg_class, type) and issubclass(cfg_class, AlgorithmCfg)):
        raise ValueError(f"algorithm {name!r}: cfg_class must subclass AlgorithmCfg (got {cfg_class!r})")
    key = name.lower()
    known = _REGISTRY.get(key)
    if known is not None:
        if known.cfg_class is not cfg_class:
            raise ValueError(f"algorithm {name!r} is already registered with {known.cfg_class.__name__}")
        if known.algo is not None and algo is not None and known.algo is not algo:
            raise ValueError(f"algorithm {name!r} is already registered by {known.algo.__name__}")
        _REGISTRY[key] = replace(known, algo=algo or known.algo)
        return
    # the block's ``name`` is a Literal made at runtime: no static type expression can name it
    block = block or create_model(  # pyright: ignore[reportCallIssue]
        f"{cfg_class.__name__.removesuffix('Cfg')}Block",
        __base__=AlgorithmBlock,
        __doc__=f"``algorithm`` block of {key!r}: its ``cfg`` is a ``{cfg_class.__name__}``.",
        name=(Literal[key], key),  # pyright: ignore[reportArgumentType]
        cfg=(cfg_class, Field(default_factory=cfg_class)),
    )
    _REGISTRY[key] = Registered(cfg_class, block, algo)
    _UNION.clear()


def algorithm_names() -> list[str]:
    """Names accepted by ``algorithm.name``, sorted."""
    return sorted(_REGISTRY)


def registered(name: str) -> Registered:
    """The entry of ``name`` (any case); a one-line ``ConfigError`` naming the accepted names otherwise."""
    key = name.lower()
    if key not in _REGISTRY:
        accepted = ", ".join(algorithm_names())
        raise ConfigError(f"algorithm.name: unknown algorithm {name!r}; accepted: {accepted}")
    return _REGISTRY[key]


def validate_algorithm(data: object) -> AlgorithmBlock:
    """``{name, cfg}`` → the registered block of ``name`` (``ValidationError`` located in the block)."""
    if isinstance(data, AlgorithmBlock):
        if type(data) is not AlgorithmBlock:
            return data
        data = {"name": data.name, "cfg": data.cfg.model_dump(exclude_unset=True)}
    if not isinstance(data, dict):
        raise located_error("AlgorithmBlock", [((), "Input should be a mapping {name, cfg}", data)])
    name = data.get("name", DEFAULT)
    if not isinstance(name, str) or name.lower() not in _REGISTRY:
        problem = (
            f"unknown algorithm {name!r}; accepted: {', '.join(algorithm_names())}"
            if isinstance(name, str)
            else "Input should be a valid string"
        )
        raise located_error("AlgorithmBlock", [(("name",), problem, name)])
    key = name.lower()
    try:
        return _union().validate_python({**data, "name": key})
    except ValidationError as exc:
        raise _in_block(exc, key) from None


def replay_algorithm(block: AlgorithmBlock, override: dict[str, Any]) -> AlgorithmBlock:
    """``block`` with ``replay.algorithm``'s ``{name?, cfg?}`` merged over it; ``ConfigError`` naming the key.

    A changed ``name`` starts from that algorithm's defaults; a ``null`` value keeps the run's own
    (so ``params.yaml`` can list a key for ``dvc exp run -S`` without changing anything).
    """
    try:
        return merged_replay_block(block, override)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "replay.algorithm")) from None


def merged_replay_block(block: AlgorithmBlock, override: dict[str, Any]) -> AlgorithmBlock:
    """:func:`replay_algorithm`, raising the ``ValidationError`` located below ``replay.algorithm``."""
    unknown = sorted(set(override) - {"name", "cfg"})
    if unknown:
        raise located_error("ReplayCfg", [((unknown[0],), "unknown key; accepted: name, cfg", {})])
    changes = override.get("cfg") or {}
    if not isinstance(changes, dict):
        raise located_error(
            "ReplayCfg", [(("cfg",), "Input should be a mapping of algorithm.cfg keys", changes)]
        )
    name = override.get("name", block.name)
    same = isinstance(name, str) and name.lower() == block.name
    kept = {key: value for key, value in changes.items() if value is not None}
    if same and not kept:
        return block  # nothing replaced: the block as loaded (validated once)
    base = block.to_dict()["cfg"] if same else {}
    return validate_algorithm({"name": name, "cfg": {**base, **kept}})


def _union() -> TypeAdapter[AlgorithmBlock]:
    """The discriminated union of every registered block, keyed on ``name``."""
    if not _UNION:
        arms = tuple(Annotated[entry.block, Tag(name)] for name, entry in sorted(_REGISTRY.items()))
        # the blocks are registered at runtime: no static type expression can name their union
        union = Annotated[Union[arms], Discriminator(_name_of)]  # noqa: UP007  # pyright: ignore[reportInvalidTypeArguments, reportInvalidTypeForm]
        _UNION.append(TypeAdapter(union))  # pyright: ignore[reportArgumentType]
    return _UNION[0]


def _name_of(value: object) -> str | None:
    return value.get("name") if isinstance(value, dict) else getattr(value, "name", None)


def _in_block(exc: ValidationError, key: str) -> ValidationError:
    """The union's errors located in the block (without the union's tag).

    An unknown key lists the keys of the algorithm's own config class.
    """
    block = _REGISTRY[key].block
    problems = []
    for error in exc.errors():
        loc = error["loc"][1:] if error["loc"][:1] == (key,) else error["loc"]
        if error["type"] == "extra_forbidden":
            problems.append((loc, unknown_key(field_model(block, loc[:-1]), str(loc[-1])), {}))
        else:
            problems.append((loc, error["msg"], error.get("input")))
    return located_error(exc.title, problems)


register_algorithm("ppo", PPOCfg, block=PPOBlock)
register_algorithm("grpo", GRPOCfg, block=GRPOBlock)
register_algorithm("distillation", DistillationCfg)

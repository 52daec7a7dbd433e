"""The ``algorithm: {name, cfg}`` block: ``cfg`` validated by the config class ``name`` resolves to.

One block class per algorithm name (``PPOBlock``, ``GRPOBlock``, the others made at first use), its
``cfg`` typed by that algorithm's config class, so ``algorithm.cfg`` is checked once, at load, with
one-line errors naming the key. Resolving ``name`` (:mod:`rlpipe.config.registry`) imports a
plug-in's module; a built-in's config class is torch-free. Inside
:func:`~rlpipe.config.registry.describing` a name not yet resolved is kept as written
(:class:`UnresolvedBlock`): a run is described without running its code.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializationInfo,
    ValidationError,
    create_model,
    field_serializer,
    model_validator,
)

from rlpipe.config.algorithms import AlgorithmCfg, GRPOCfg, PPOCfg
from rlpipe.config.errors import ConfigError, field_model, format_validation_error, located_error, unknown_key
from rlpipe.config.registry import BUILTIN_ALGORITHMS, algorithm_key, is_describing, registered
from rlpipe.config.strict import StrictModel

__all__ = [
    "AlgorithmBlock",
    "GRPOBlock",
    "PPOBlock",
    "UnresolvedBlock",
    "UnresolvedCfg",
    "block_of",
    "merged_replay_block",
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
    """A built-in name (``ppo``, ``grpo``, ``distillation``; any case), an ``rlpipe.algorithms`` entry
    point, or ``package.module:Class`` (a ``BaseAlgorithm`` subclass naming its ``cfg_class``)."""
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

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickled as ``{name, cfg}``: unpickling resolves the name again (block classes are made at use)."""
        return validate_algorithm, ({"name": self.name, "cfg": self.cfg.model_dump(exclude_unset=True)},)

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


class UnresolvedCfg(StrictModel):
    """``algorithm.cfg`` of a name not resolved (a described run's plug-in): the keys as written."""

    model_config = ConfigDict(extra="allow")


class UnresolvedBlock(AlgorithmBlock):
    """The block of a name a describing command did not resolve: ``cfg`` kept as written, unchecked."""

    cfg: UnresolvedCfg = Field(default_factory=UnresolvedCfg)  # pyright: ignore[reportIncompatibleVariableOverride]
    """The keys the params set."""


_BLOCKS: dict[str, type[AlgorithmBlock]] = {"ppo": PPOBlock, "grpo": GRPOBlock}
"""The block class of each resolved name (made from its config class at first use)."""


def block_of(name: str) -> type[AlgorithmBlock]:
    """The block class of algorithm ``name`` (resolving it: a plug-in's module is imported)."""
    key = algorithm_key(name)
    cfg_class = registered(key).cfg_class
    block = _BLOCKS.get(key)
    if block is None or block.model_fields["cfg"].annotation is not cfg_class:
        # the block's ``name`` is a Literal made at runtime: no static type expression can name it
        block = create_model(  # pyright: ignore[reportCallIssue]
            f"{cfg_class.__name__.removesuffix('Cfg')}Block",
            __base__=AlgorithmBlock,
            __doc__=f"``algorithm`` block of {key!r}: its ``cfg`` is a ``{cfg_class.__name__}``.",
            name=(Literal[key], key),  # pyright: ignore[reportArgumentType]
            cfg=(cfg_class, Field(default_factory=cfg_class)),
        )
        _BLOCKS[key] = block
    return block


def validate_algorithm(data: object) -> AlgorithmBlock:
    """``{name, cfg}`` → the block of ``name`` (``ValidationError`` located in the block)."""
    if isinstance(data, AlgorithmBlock):
        if type(data) is not AlgorithmBlock:
            return data
        data = {"name": data.name, "cfg": data.cfg.model_dump(exclude_unset=True)}
    if not isinstance(data, dict):
        raise located_error("AlgorithmBlock", [((), "Input should be a mapping {name, cfg}", data)])
    name = data.get("name", DEFAULT)
    if not isinstance(name, str):
        raise located_error("AlgorithmBlock", [(("name",), "Input should be a valid string", name)])
    key = algorithm_key(name)
    if is_describing() and key not in _BLOCKS and key not in BUILTIN_ALGORITHMS:
        return UnresolvedBlock.model_validate({**data, "name": key})
    try:
        block = block_of(key)
    except ConfigError as exc:  # unknown, or its module does not import: one line at algorithm.name
        problem = str(exc).removeprefix("algorithm.name: ")
        raise located_error("AlgorithmBlock", [(("name",), problem, problem)]) from None
    try:
        return block.model_validate({**data, "name": key})
    except ValidationError as exc:
        raise _in_block(exc, block) from None


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
    same = isinstance(name, str) and algorithm_key(name) == block.name
    kept = {key: value for key, value in changes.items() if value is not None}
    if same and not kept:
        return block  # nothing replaced: the block as loaded (validated once)
    base = block.to_dict()["cfg"] if same else {}
    return validate_algorithm({"name": name, "cfg": {**base, **kept}})


def _in_block(exc: ValidationError, block: type[AlgorithmBlock]) -> ValidationError:
    """The block's errors; an unknown key lists the keys of the algorithm's own config class."""
    problems = []
    for error in exc.errors():
        loc = error["loc"]
        if error["type"] == "extra_forbidden":
            problems.append((loc, unknown_key(field_model(block, loc[:-1]), str(loc[-1])), {}))
        else:
            problems.append((loc, error["msg"], error.get("input")))
    return located_error(exc.title, problems)

"""The source documents' JSON train-config: every key mapped to rlpipe's, or named as having no effect.

A ``train_config.json`` of the documents (``trainer``/``policy``/``algorithm`` blocks, the env in a
separate ``trainer.gym_config`` file or an ``env`` block) loads as is. Most keys are rlpipe's own;
the rest are translated here before validation:

* ``trainer.gym_config`` → the ``env`` block: ``id`` → ``env.id``, ``cfg`` → ``env.cfg`` (the env's
  constructor arguments), ``extensions`` (task parameters) merged into ``env.cfg``, ``num_envs`` →
  ``trainer.num_envs`` unless the trainer sets it;
* ``headless``, ``enable_rt``, ``gpu_id``, ``use_wandb``, ``wandb_project_name`` and the env's
  ``actions``, ``sim_cfg`` or any other field rlpipe has no use for: one warning line each, naming
  the key and what rlpipe does instead, and the key is dropped.

Only the documents' JSON format warns about every such key; in a YAML params file (a run directory's
``params.yaml`` included) the trainer's compatibility keys are dropped silently when they hold
their defaults, and warned about otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlpipe.config.errors import ConfigError
from rlpipe.location import AnyPath

__all__ = ["NO_EFFECT_TRAINER", "translate"]

NO_EFFECT_TRAINER: dict[str, tuple[Any, str]] = {
    "headless": (True, "rlpipe never opens a viewer; eval.video: true films evaluations"),
    "enable_rt": (False, "rlpipe has no ray-traced renderer"),
    "gpu_id": (0, "the device is trainer.device (auto, cpu, cuda:N)"),
    "use_wandb": (False, "rlpipe tracks with MLflow, not W&B (tracking.backend: mlflow)"),
    "wandb_project_name": (None, "the MLflow experiment is trainer.exp_name"),
}
"""Trainer keys of the documents that rlpipe has no use for: (their default, what rlpipe does instead)."""
ENV_NO_EFFECT = {
    "actions": "rlpipe envs take the policy's action as is (no action manager)",
    "sim_cfg": "simulation settings belong to the env's own constructor arguments (env.cfg)",
}
"""Env fields of the documents with no rlpipe equivalent, and why."""


def translate(data: dict[str, Any], path: AnyPath) -> tuple[dict[str, Any], list[str]]:
    """``(params rlpipe validates, warning lines)`` for a params file read from ``path``."""
    documents = path.suffix == ".json"
    data, notes = _trainer_keys(data, documents)
    data, env_notes = _gym_config(data, path)
    notes += env_notes
    env = data.get("env")
    if documents and isinstance(env, dict) and isinstance(env.get("cfg"), dict):
        env_cfg, extra, cfg_notes = _env_fields(env["cfg"], "env.cfg")
        data = {**data, "env": {**env, "cfg": env_cfg}}
        notes += cfg_notes + _num_envs(data, extra.get("num_envs"), "env.cfg.num_envs")
    return data, [f"{path}: {note}" for note in notes]


def _trainer_keys(data: dict[str, Any], documents: bool) -> tuple[dict[str, Any], list[str]]:
    trainer = data.get("trainer")
    if not isinstance(trainer, dict):
        return data, []
    trainer, notes = dict(trainer), []
    for key, (default, instead) in NO_EFFECT_TRAINER.items():
        if key in trainer:
            value = trainer.pop(key)
            if documents or value != default:
                notes.append(f"trainer.{key} has no effect: {instead}")
    return {**data, "trainer": trainer}, notes


def _gym_config(data: dict[str, Any], path: AnyPath) -> tuple[dict[str, Any], list[str]]:
    """Inline ``trainer.gym_config`` as the ``env`` block (see the module doc)."""
    trainer = data.get("trainer") or {}
    gym_config = trainer.get("gym_config")
    if gym_config is None:
        return data, []
    data = {**data, "trainer": {k: v for k, v in trainer.items() if k != "gym_config"}}
    if "env" in data:
        return data, ["trainer.gym_config has no effect: the file's env block is used"]
    env_path = (path.parent / gym_config) if not Path(gym_config).is_absolute() else Path(gym_config)
    if not env_path.is_file():
        env_path = Path(gym_config)
    if not env_path.is_file():
        raise ConfigError(f"{path}: trainer.gym_config: env JSON {gym_config!r} not found")
    try:
        env_json = json.loads(env_path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{env_path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    if not isinstance(env_json, dict) or "id" not in env_json:
        raise ConfigError(f"{env_path}: trainer.gym_config: expected an object with an 'id' (the env id)")
    where = f"gym_config {env_path.name}"
    fields = {k: v for k, v in env_json.items() if k not in ("id", "cfg")}
    env_cfg, extra, notes = _env_fields(dict(env_json.get("cfg") or {}), f"{where} cfg")
    top_cfg, top_extra, top_notes = _env_fields(fields, where, unknown_warns=True)
    env = {"id": env_json["id"], "cfg": {**top_cfg, **env_cfg}}
    data = {**data, "env": env}
    num_envs = extra.get("num_envs", top_extra.get("num_envs"))
    return data, notes + top_notes + _num_envs(data, num_envs, f"{where} num_envs")


def _env_fields(
    fields: dict[str, Any], where: str, unknown_warns: bool = False
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """``(constructor arguments, {num_envs}, notes)`` of an env's fields in the documents' form.

    ``extensions`` are task parameters: constructor arguments here. ``unknown_warns``: a field
    that is none of those (the gym_config file's top level) has no effect, rather than being an
    argument of the env.
    """
    cfg: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in fields.items():
        if key == "num_envs":
            extra["num_envs"] = value
        elif key == "extensions" and isinstance(value, dict):
            cfg.update(value)
        elif key in ENV_NO_EFFECT:
            notes.append(f"{where} {key} has no effect: {ENV_NO_EFFECT[key]}")
        elif unknown_warns:
            notes.append(f"{where} {key} has no effect: rlpipe reads id, cfg, extensions and num_envs")
        else:
            cfg[key] = value
    return cfg, extra, notes


def _num_envs(data: dict[str, Any], num_envs: object, where: str) -> list[str]:
    """Map the env's ``num_envs`` to ``trainer.num_envs`` unless the trainer sets it (mutates ``data``)."""
    if num_envs is None:
        return []
    trainer = data.setdefault("trainer", {})
    if "num_envs" in trainer:
        return [f"{where} has no effect: trainer.num_envs ({trainer['num_envs']}) sets the number of envs"]
    trainer["num_envs"] = num_envs
    return []

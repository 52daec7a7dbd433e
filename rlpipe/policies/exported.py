"""Running an exported policy file: ONNX through onnxruntime, TorchScript through ``torch.jit.load``.

:class:`ExportedModel` loads ``policy.onnx`` or ``policy.pt`` with its metadata and maps numpy
observations — one array, or one per observation group the file reads — to actions (and recurrent
states). :class:`ExportedPolicy` wraps it in the
:class:`~rlpipe.policies.base.Policy` methods the evaluator calls, so ``rlpipe eval --policy``
scores the shipped file exactly like a checkpoint.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict
from torch.distributions import Distribution

from rlpipe.extras import require
from rlpipe.policies.base import Policy
from rlpipe.policies.export import METADATA_FILE, ExportError

__all__ = ["ExportedModel", "ExportedPolicy"]


class ExportedModel:
    """An exported policy file and its metadata; ``model(obs[, state])`` → ``action[, next_state]``.

    ``obs``: ``[B, obs_dim]`` float32 numpy, or for a file exported from dict observations a mapping
    ``{group: [B, *shape]}`` holding at least the groups of :attr:`obs_keys` (image groups uint8);
    ``state``: ``[B, S]`` float32 (recurrent files only).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: exported policy not found")
        if self.path.suffix == ".onnx":
            self._run, self.metadata = _load_onnx(self.path)
        elif self.path.suffix == ".pt":
            self._run, self.metadata = _load_torchscript(self.path)
        else:
            raise ExportError(f"{self.path}: unknown policy file type; accepted: .onnx, .pt (TorchScript)")
        self.recurrent = self.metadata.get("recurrent") is not None
        self.state_size = int(self.metadata["recurrent"]["state_size"]) if self.recurrent else 0
        self.obs_dim = int(sum(self.metadata["observation"]["sizes"].values()))
        self.groups: dict[str, dict[str, Any]] = self.metadata["observation"].get("groups") or {}
        """Per group ``{"input", "shape", "dtype", "image"}``, in input order (flat observations: ``{}``)."""

    @property
    def obs_keys(self) -> tuple[str, ...] | None:
        """The observation groups the file reads, in input order (``None``: one flat ``obs``)."""
        return tuple(self.groups) if self.groups else None

    def __call__(
        self, obs: np.ndarray | Mapping[str, np.ndarray], state: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        """``(action,)`` or ``(action, next_state)``."""
        inputs = self._observation_inputs(obs)
        if self.recurrent:
            if state is None:
                raise ValueError(f"{self.path.name} is recurrent: pass the state [B, {self.state_size}]")
            inputs.append(np.ascontiguousarray(state, dtype=np.float32))
        return self._run(inputs)

    def _observation_inputs(self, obs: np.ndarray | Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if not self.groups:
            return [np.ascontiguousarray(obs, dtype=np.float32)]
        if not isinstance(obs, Mapping):
            raise ValueError(
                f"{self.path.name} reads observation groups {', '.join(self.groups)}: "
                "pass a mapping {group: array}"
            )
        missing = [k for k in self.groups if k not in obs]
        if missing:
            raise ValueError(
                f"{self.path.name}: observation group {missing[0]!r} missing; "
                f"it reads {', '.join(self.groups)}"
            )
        return [np.ascontiguousarray(obs[k], dtype=np.dtype(g["dtype"])) for k, g in self.groups.items()]


def _load_onnx(path: Path) -> tuple[Any, dict[str, Any]]:
    ort = require("onnxruntime", str(path))
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types for unreadable files
        raise ExportError(f"{path}: not a readable ONNX model ({str(exc).splitlines()[0]})") from None
    props = session.get_modelmeta().custom_metadata_map
    metadata = {key: _json_or_str(value) for key, value in props.items()}
    _check_metadata(path, metadata)
    names = [i.name for i in session.get_inputs()]
    return lambda inputs: tuple(session.run(None, dict(zip(names, inputs)))), metadata


def _load_torchscript(path: Path) -> tuple[Any, dict[str, Any]]:
    files = {METADATA_FILE: ""}
    try:
        with warnings.catch_warnings():  # torch.jit.load is deprecated in Python, not in libtorch
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(path), map_location="cpu", _extra_files=files)
    except RuntimeError as exc:
        detail = str(exc).splitlines()[0]
        raise ExportError(f"{path}: not a readable TorchScript archive ({detail})") from None
    metadata = json.loads(files[METADATA_FILE] or "{}")
    _check_metadata(path, metadata)

    @torch.no_grad()
    def run(inputs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        out = module(*(torch.from_numpy(x) for x in inputs))
        return tuple(o.numpy() for o in (out if isinstance(out, tuple) else (out,)))

    return run, metadata


def _json_or_str(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _check_metadata(path: Path, metadata: dict[str, Any]) -> None:
    missing = [key for key in ("observation", "action", "inputs") if key not in metadata]
    if missing:
        raise ExportError(f"{path}: no rlpipe metadata ({missing[0]!r}); export it with `rlpipe export`")


class ExportedPolicy(Policy):
    """The evaluator's view of an :class:`ExportedModel`: mode actions only, no critic, no log-probs.

    ``obs`` is the env's: a tensor ``[B, *obs]``, or a TensorDict ``[B]`` of groups (dict
    observations; the file's groups are picked from it). ``sample``/``sample_step`` return zero
    log-probs and values; ``deterministic`` is ignored (an exported policy has only its
    deterministic action).
    """

    has_critic = False

    def __init__(self, model: ExportedModel, device: torch.device | str) -> None:
        super().__init__()
        self.model, self.device = model, torch.device(device)
        self.is_recurrent = model.recurrent

    def _act(
        self, obs: torch.Tensor | TensorDict, state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        host_state = None if state is None else state.cpu().numpy()
        keys = self.model.obs_keys
        if keys is None:
            host: np.ndarray | dict[str, np.ndarray] = obs.flatten(1).cpu().numpy()
        elif isinstance(obs, TensorDict):
            host = {k: obs[k].cpu().numpy() for k in keys}
        else:
            raise ValueError(
                f"{self.model.path.name} reads observation groups {', '.join(keys)}; the env "
                "gives one flat observation"
            )
        out = self.model(host, host_state)
        action = torch.from_numpy(out[0]).to(self.device)
        return action, (torch.from_numpy(out[1]).to(self.device) if len(out) > 1 else None)

    def sample(self, obs: torch.Tensor, deterministic: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, *act], zeros [B])``."""
        state = self.initial_state(obs.shape[0]) if self.is_recurrent else None
        action, _ = self._act(obs, state)
        return action, torch.zeros(obs.shape[0], device=self.device)

    def sample_step(
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, zeros [B], zeros [B], next_state [B, S])``."""
        action, next_state = self._act(obs, state)
        zeros = torch.zeros(obs.shape[0], device=self.device)
        assert next_state is not None
        return action, zeros, zeros, next_state

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros ``[batch, S]``."""
        return torch.zeros(batch, self.model.state_size, device=self.device)

    def distribution(self, obs: torch.Tensor) -> Distribution:
        """Not available: an exported file holds the deterministic action only."""
        raise NotImplementedError("an exported policy has no action distribution")

    def deterministic_action(self, dist: Distribution) -> torch.Tensor:
        """Not available (see :meth:`distribution`)."""
        raise NotImplementedError("an exported policy has no action distribution")

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Zeros ``[B]``."""
        return torch.zeros(obs.shape[0], device=self.device)

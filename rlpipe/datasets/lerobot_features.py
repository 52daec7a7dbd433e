"""Which part of an rlpipe episode becomes which LeRobot v3.0 feature, and its columns.

==================================  =========================  ==========================================
LeRobot key                         dtype, shape               from the episode
==================================  =========================  ==========================================
``observation.state``               float32 ``[D]``            the actor's vector groups, concatenated in
                                                               the space's order (flat obs: the vector)
``observation.environment_state``   float32 ``[E]``            the privileged (critic-only) vector groups
``observation.images.<group>``      video/image ``[H, W, 3]``  an image group ``[K·C, H, W]``: the newest
                                                               frame of the stack (its last C channels;
                                                               gray repeated into R = G = B)
``action``                          float32 ``[A]`` (Box) or   the executed action, or the policy mean
                                    int64 (Discrete)
``next.reward``                     float32                    the reward of the step
``next.done`` / ``next.terminated``  bool                      done = terminated or truncated
/ ``next.truncated``
``next.success``                    bool                       where the env reports success
``rl.iteration`` ``rl.log_prob``    int64, float32, float32,   the stored iteration, log-prob of the
``rl.value`` ``rl.rank``            int64, int64               executed action, V(obs), the stream
``rl.env``
``timestamp`` ``frame_index``       float32, int64 ×4          LeRobot's own: ``frame_index / fps``, the
``episode_index`` ``index``                                    step in the episode, the episode, the frame
``task_index``                                                 in the dataset, the one task
==================================  =========================  ==========================================

rlpipe's extras stay under ``rl.``: LeRobot treats every key starting with ``action`` as an action
and every key starting with ``observation`` as an input. In the data parquet a shape ``(1,)``
feature is a plain column and a vector a fixed-size list, as ``datasets`` writes ``Value`` and
``List(length=D)``; the schema carries the ``datasets`` feature metadata so Hub tools read it.

Every camera is written with 3 channels: LeRobot's readers, stats and edit tools take image features
as RGB (its per-camera stats must be ``[3, 1, 1]``), so a gray frame becomes three identical channels,
each one the stored gray value exactly, as PNG and as video alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np
import pyarrow as pa

from rlpipe.datasets.lerobot_video import encoder_info, png_bytes

if TYPE_CHECKING:
    from rlpipe.datasets.episodes import DatasetSource, Episode

__all__ = ["Camera", "Layout", "layout_of"]

STATE, ENV_STATE, ACTION = "observation.state", "observation.environment_state", "action"
RGB = 3
"""The channels of every camera frame written (LeRobot takes image features as RGB)."""
_LEROBOT_OWN = {
    "timestamp": "float32",
    "frame_index": "int64",
    "episode_index": "int64",
    "index": "int64",
    "task_index": "int64",
}


@dataclass(frozen=True)
class Camera:
    """One image group as a LeRobot camera: the newest ``channels`` of the stack, stored HWC RGB."""

    group: str
    key: str
    channels: int  # channels of one frame in the store (1: gray, 3: RGB)
    height: int
    width: int

    def frames(self, observations: np.ndarray) -> np.ndarray:
        """``[L, K·C, H, W]`` → the newest frame of each stack, ``[L, H, W, 3]`` uint8 (gray: R = G = B)."""
        newest = np.asarray(observations)[:, -self.channels :].transpose(0, 2, 3, 1)
        if self.channels != RGB:
            newest = np.repeat(newest, RGB, axis=-1)
        return np.ascontiguousarray(newest, dtype=np.uint8)


@dataclass(frozen=True)
class Layout:
    """How a source's episodes map to LeRobot features (see the module table)."""

    features: dict[str, dict]
    state_groups: tuple[str | None, ...]  # None: the flat observation
    env_state_groups: tuple[str, ...]
    cameras: tuple[Camera, ...]
    action_dtype: str
    success: bool
    video: bool

    def columns(
        self,
        episode: Episode,
        *,
        episode_index: int,
        first_index: int,
        fps: int,
        frames: dict[str, np.ndarray],
    ) -> dict[str, np.ndarray | list]:
        """The data columns of ``episode`` (``frames``: each camera's ``[L, H, W, C]``)."""
        length = episode.length
        steps = np.arange(length, dtype=np.int64)
        cols: dict[str, np.ndarray | list] = {}
        if self.state_groups:
            cols[STATE] = _concatenated(episode.observations, self.state_groups, length)
        if self.env_state_groups:
            cols[ENV_STATE] = _concatenated(episode.observations, self.env_state_groups, length)
        if not self.video:
            for camera in self.cameras:
                cols[camera.key] = [
                    {"bytes": png_bytes(f), "path": f"frame-{i:06d}.png"}
                    for i, f in enumerate(frames[camera.key])
                ]
        actions = np.asarray(episode.actions).reshape(length, -1).astype(self.action_dtype)
        cols[ACTION] = actions[:, 0] if self.features[ACTION]["shape"] == [1] else actions
        terminated = np.asarray(episode.terminated, dtype=bool)
        truncated = np.asarray(episode.truncated, dtype=bool)
        cols["next.reward"] = np.asarray(episode.rewards, dtype=np.float32)
        cols["next.done"] = terminated | truncated
        cols["next.terminated"] = terminated
        cols["next.truncated"] = truncated
        if self.success:
            if episode.success is None:
                raise ValueError(
                    f"episode {episode_index} (rank {episode.rank}, env {episode.env}) has "
                    "no success flags while earlier episodes have them"
                )
            cols["next.success"] = np.asarray(episode.success, dtype=bool)
        cols["rl.iteration"] = np.asarray(episode.iterations, dtype=np.int64)
        cols["rl.log_prob"] = np.asarray(episode.log_probs, dtype=np.float32)
        cols["rl.value"] = np.asarray(episode.values, dtype=np.float32)
        cols["rl.rank"] = np.full(length, episode.rank, dtype=np.int64)
        cols["rl.env"] = np.full(length, episode.env, dtype=np.int64)
        cols["timestamp"] = (steps / fps).astype(np.float32)
        cols["frame_index"] = steps
        cols["episode_index"] = np.full(length, episode_index, dtype=np.int64)
        cols["index"] = first_index + steps
        cols["task_index"] = np.zeros(length, dtype=np.int64)
        return cols

    def table(self, cols: dict[str, np.ndarray | list]) -> pa.Table:
        """The columns as an Arrow table of :meth:`schema`."""
        schema = self.schema()
        arrays = [_arrow(cols[field.name], field.type) for field in schema]
        return pa.Table.from_arrays(arrays, schema=schema)

    def schema(self) -> pa.Schema:
        """The data parquet's schema, with the ``datasets`` feature metadata."""
        fields, hf = [], {}
        for key, ft in self.features.items():
            if ft["dtype"] == "video":
                continue
            if ft["dtype"] == "image":
                fields.append(pa.field(key, pa.struct([("bytes", pa.binary()), ("path", pa.string())])))
                hf[key] = {"_type": "Image"}
                continue
            value = pa.from_numpy_dtype(np.dtype(ft["dtype"]))
            if ft["shape"] == [1]:
                fields.append(pa.field(key, value))
                hf[key] = {"dtype": ft["dtype"], "_type": "Value"}
            else:
                fields.append(pa.field(key, pa.list_(value, ft["shape"][0])))
                hf[key] = {
                    "feature": {"dtype": ft["dtype"], "_type": "Value"},
                    "length": ft["shape"][0],
                    "_type": "List",
                }
        return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": hf}})})


def _concatenated(observations, groups: tuple[str | None, ...], length: int) -> np.ndarray:
    parts = [np.asarray(observations if g is None else observations[g]).reshape(length, -1) for g in groups]
    return np.concatenate(parts, axis=1).astype(np.float32)


def _arrow(values: np.ndarray | list, type_: pa.DataType) -> pa.Array:
    if isinstance(type_, pa.FixedSizeListType):
        flat = np.ascontiguousarray(values).reshape(-1)
        return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=type_.value_type), type_.list_size)
    return pa.array(values, type=type_)


def _size(space: gym.Space) -> int:
    return int(np.prod(space.shape)) if space.shape else 1


def _vector_feature(groups: tuple[str | None, ...], spaces: dict[str | None, gym.Space]) -> dict:
    names = [f"{g or 'obs'}/{i}" for g in groups for i in range(_size(spaces[g]))]
    return {"dtype": "float32", "shape": [len(names)], "names": names}


def _action_feature(space: gym.Space) -> tuple[dict, str]:
    if isinstance(space, gym.spaces.Discrete):
        return {"dtype": "int64", "shape": [1], "names": None}, "int64"
    dtype = "int64" if isinstance(space, gym.spaces.MultiDiscrete | gym.spaces.MultiBinary) else "float32"
    size = _size(space)
    return {"dtype": dtype, "shape": [size], "names": [f"{ACTION}/{i}" for i in range(size)]}, dtype


def _camera(group: str, shape: tuple[int, ...], channels: int) -> Camera:
    _, height, width = shape
    return Camera(
        group=group, key=f"observation.images.{group}", channels=channels, height=height, width=width
    )


def layout_of(source: DatasetSource, *, video: bool, success: bool) -> Layout:
    """The features of ``source``'s episodes (``success``: whether they carry success flags)."""
    space = source.observation_space
    spaces: dict[str | None, gym.Space]
    if isinstance(space, gym.spaces.Dict):
        spaces = {**space.spaces}
        names: tuple[str | None, ...] = tuple(space.spaces)
    else:
        spaces, names = {None: space}, (None,)
    cameras = tuple(_camera(g, source.image_shape(g), source.frame_channels[g]) for g in source.image_groups)
    vectors = [g for g in names if g not in source.image_groups]
    env_state = tuple(g for g in vectors if g in source.privileged_groups)
    state = tuple(g for g in vectors if g not in source.privileged_groups)
    features: dict[str, dict] = {}
    if state:
        features[STATE] = _vector_feature(state, spaces)
    if env_state:
        features[ENV_STATE] = _vector_feature(env_state, spaces)
    for cam in cameras:
        features[cam.key] = {
            "dtype": "video" if video else "image",
            "shape": [cam.height, cam.width, RGB],
            "names": ["height", "width", "channels"],
            "info": encoder_info(cam.height, cam.width, source.fps or 0)
            if video
            else {"is_depth_map": False},
        }
    features[ACTION], action_dtype = _action_feature(source.action_space)
    scalars = {
        "next.reward": "float32",
        "next.done": "bool",
        "next.terminated": "bool",
        "next.truncated": "bool",
        **({"next.success": "bool"} if success else {}),
        "rl.iteration": "int64",
        "rl.log_prob": "float32",
        "rl.value": "float32",
        "rl.rank": "int64",
        "rl.env": "int64",
        **_LEROBOT_OWN,
    }
    features.update({key: {"dtype": dtype, "shape": [1], "names": None} for key, dtype in scalars.items()})
    return Layout(
        features=features,
        state_groups=state,
        env_state_groups=env_state,
        cameras=cameras,
        action_dtype=action_dtype,
        success=success,
        video=video,
    )

"""lerobot 0.4.4 reads rlpipe's exports as the stores hold them: frames, windows, a DataLoader, validation.

Every check compares what ``LeRobotDataset`` returns with the run's stores read by zarr alone
(``make_exports.py``), never with the exporter's own files.
"""

from __future__ import annotations

import numpy as np
import pytest
from _lerobot_lane import FPS, as_uint8, episode_bounds, rgb

pytestmark = pytest.mark.lane

IMAGE = "observation.images.pixels"
PSNR_FRAME_DB, PSNR_ALL_DB = 30.0, 40.0
"""AV1 (crf 30) of a 32×32 gray camera: the least PSNR of any one frame, and of all frames together."""


def _items(dataset) -> dict[str, np.ndarray]:
    """Every item of ``dataset`` in index order, each key stacked (the ``task`` strings left out)."""
    items = [dataset[i] for i in range(len(dataset))]
    return {key: np.stack([np.asarray(item[key]) for item in items]) for key in items[0] if key != "task"}


def _assert_rows_equal(items: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    """State, action, reward, done and LeRobot's own indices of every frame, exactly."""
    np.testing.assert_array_equal(items["observation.state"], expected["state"])
    np.testing.assert_array_equal(items["action"].reshape(expected["action"].shape), expected["action"])
    np.testing.assert_array_equal(items["next.reward"], expected["reward"])
    np.testing.assert_array_equal(items["next.done"], expected["done"])
    steps = np.concatenate([np.arange(n) for n in expected["lengths"]])
    episodes = np.repeat(np.arange(len(expected["lengths"])), expected["lengths"])
    np.testing.assert_array_equal(items["frame_index"], steps)
    np.testing.assert_array_equal(items["episode_index"], episodes)
    np.testing.assert_array_equal(items["timestamp"], (steps / FPS).astype(np.float32))


def test_a_cartpole_export_reads_equal_to_its_stores(load, stored):
    dataset, expected = load("cartpole"), stored("cartpole")
    assert dataset.meta.total_episodes == len(expected["lengths"]) >= 3
    assert dataset.fps == FPS and len(dataset) == len(expected["reward"])
    _assert_rows_equal(_items(dataset), expected)


def test_every_png_frame_of_a_gray_camera_reads_bit_exact(load, stored):
    dataset, expected = load("pixels-png"), stored("pixels-png")
    items = _items(dataset)
    _assert_rows_equal(items, expected)
    assert items[IMAGE].shape == (len(expected["reward"]), 3, 32, 32)
    np.testing.assert_array_equal(as_uint8(items[IMAGE]), rgb(expected["pixels"]))


def _psnr(mse: np.ndarray) -> np.ndarray:
    """PSNR in dB of uint8 images from their mean squared error (an exact image counts as 100 dB)."""
    return np.where(mse == 0, 100.0, 10 * np.log10(255.0**2 / np.maximum(mse, 1e-12)))


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_every_video_frame_of_a_gray_camera_reads_close_to_the_stored_one(load, stored, backend):
    dataset, expected = load("pixels-video", video_backend=backend), stored("pixels-video")
    items = _items(dataset)
    _assert_rows_equal(items, expected)
    error = (as_uint8(items[IMAGE]).astype(np.float64) - rgb(expected["pixels"])) ** 2
    per_frame = error.reshape(len(error), -1).mean(axis=1)
    assert _psnr(per_frame).min() >= PSNR_FRAME_DB, _psnr(per_frame).min()
    assert _psnr(per_frame.mean()) >= PSNR_ALL_DB, _psnr(per_frame.mean())


def test_delta_timestamps_windows_hold_the_stored_neighbours_padded_at_episode_ends(load, stored):
    offsets = [-2, -1, 0, 1]
    delta = {key: [k / FPS for k in offsets] for key in ("observation.state", IMAGE, "action")}
    dataset, expected = load("pixels-png", delta_timestamps=delta), stored("pixels-png")
    for start, end in episode_bounds(expected["lengths"]):
        for index in range(start, end):
            item = dataset[index]
            wanted = np.clip(index + np.array(offsets), start, end - 1)
            np.testing.assert_array_equal(item["observation.state"], expected["state"][wanted])
            np.testing.assert_array_equal(as_uint8(item[IMAGE]), rgb(expected["pixels"][wanted]))
            np.testing.assert_array_equal(np.asarray(item["action"]).ravel(), expected["action"][wanted])
            pad = (index + np.array(offsets) < start) | (index + np.array(offsets) >= end)
            np.testing.assert_array_equal(item["observation.state_is_pad"], pad)


def test_a_dataloader_with_workers_reads_every_frame(load, stored):
    import torch

    dataset, expected = load("pixels-png"), stored("pixels-png")
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, num_workers=2, shuffle=False)
    batches = list(loader)
    images = torch.cat([batch[IMAGE] for batch in batches]).numpy()
    np.testing.assert_array_equal(as_uint8(images), rgb(expected["pixels"]))
    state = torch.cat([batch["observation.state"] for batch in batches]).numpy()
    np.testing.assert_array_equal(state, expected["state"])


@pytest.mark.parametrize("name", ["cartpole", "pixels-png", "pixels-video"])
def test_validate_frame_accepts_every_frame_as_a_recorder_would_give_it(load, name):
    from lerobot.datasets.utils import DEFAULT_FEATURES, validate_frame

    dataset = load(name)
    features = dataset.meta.features
    for index in range(len(dataset)):
        item = dataset[index]
        frame: dict = {"task": item["task"]}
        for key, feature in features.items():
            if key in DEFAULT_FEATURES:
                continue
            value = np.asarray(item[key])
            if feature["dtype"] in ("image", "video"):
                frame[key] = as_uint8(value).transpose(1, 2, 0)  # HWC uint8, as a camera gives it
            else:
                frame[key] = value.reshape(feature["shape"])
        validate_frame(frame, features)

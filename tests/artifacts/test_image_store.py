"""Image rollouts in the store: uint8 ``[N, T+1, C, H, W]`` groups round-trip bit for bit, any codec."""

from __future__ import annotations

import pytest
import torch
import zarr

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.store import write_rollout
from rlpipe.artifacts.zarr_io import CODECS
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.envs import build_env
from rlpipe.rollout import allocate_rollout
from rlpipe.rollout_checks import RolloutError, check_schema, validate

N, T = 4, 6


def pixel_rollout() -> torch.Tensor:
    """A rollout of real PixelCartPole frames (random actions) beside a vector group."""
    env = build_env("PixelCartPole", N, "cpu", {"size": 32, "frame_stack": 2, "state_group": True}, "auto")
    ro = allocate_rollout(N, T, env.obs_spec, (), torch.int64, "cpu", obs_dtypes=env.obs_dtypes)
    obs, g = env.reset(seed=0), torch.Generator().manual_seed(0)
    for t in range(T):
        ro["obs"][:, t] = obs
        action = torch.randint(0, 2, (N,), generator=g)
        step = env.step(action)
        ro["action"][:, t], ro["reward"][:, t] = action, step.reward
        ro["terminated"][:, t], ro["truncated"][:, t] = step.terminated, step.truncated
        obs = step.obs
    ro["obs"][:, T] = obs
    ro["done"][:, :T] = ro["terminated"][:, :T] | ro["truncated"][:, :T]
    validate(ro)
    return ro


@pytest.mark.parametrize("image_codec", CODECS)
def test_image_groups_round_trip_bit_for_bit(tmp_path, image_codec):
    ro = pixel_rollout()
    assert ro["obs", "pixels"].dtype == torch.uint8 and ro["obs", "pixels"].shape == (N, T + 1, 2, 32, 32)
    path = tmp_path / "iter-000001.zarr"
    write_rollout(path, ro, {"iteration": 1}, "none", 2, image_codec)
    back, _ = read_rollout(path)
    assert back["obs", "pixels"].dtype == torch.uint8
    for key in ro.keys(True, True):
        assert torch.equal(back[key], ro[key]), key
    group = zarr.open_group(str(path), mode="r")
    pixels, state = group["obs/pixels"], group["obs/state"]
    assert pixels.chunks == (2, T + 1, 2, 32, 32)  # chunked along envs only
    names = [type(c).__name__ for c in pixels.compressors]
    assert (names == ["Crc32cCodec"]) == (image_codec == "none")
    assert [type(c).__name__ for c in state.compressors] == ["Crc32cCodec"]  # vectors keep store.codec


def test_a_compressed_image_store_is_smaller(tmp_path):
    ro = pixel_rollout()
    sizes = {}
    for codec in ("none", "blosc-zstd"):
        write_rollout(tmp_path / codec, ro, {}, "none", 1024, codec)
        chunks = (tmp_path / codec / "obs" / "pixels").glob("c.*")
        sizes[codec] = sum(p.stat().st_size for p in chunks if p.is_file())
    assert sizes["blosc-zstd"] * 10 < sizes["none"]


def test_a_uint8_observation_of_the_wrong_rank_is_refused(tmp_path):
    ro = allocate_rollout(
        2, 3, {"pixels": (8, 8)}, (), torch.int64, "cpu", obs_dtypes={"pixels": torch.uint8}
    )
    with pytest.raises(RolloutError, match=r"image group 'obs/pixels' has shape \[2, 4, 8, 8\]"):
        check_schema(ro)
    with pytest.raises(StoreError, match="obs/pixels"):
        write_rollout(tmp_path / "bad.zarr", ro, {})
    assert not (tmp_path / "bad.zarr").exists()

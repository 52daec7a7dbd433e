"""`rlpipe export` and `rlpipe eval --policy [--video]` of a policy reading camera frames and a vector."""

from __future__ import annotations

import json
import warnings

import imageio_ffmpeg
import numpy as np
import onnxruntime
import pytest
import torch
from _pixel_fixtures import tiny_pixel_cfg
from click.testing import CliRunner

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.envs import build_env
from rlpipe.evaluation import EVAL_SEED_OFFSET
from rlpipe.policies import build_policy
from rlpipe.trainer import Trainer

FILES = {"onnx": "policy.onnx", "torchscript": "policy.pt"}


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def pixels(tmp_path_factory):
    """The tiny pixel run (frames + normalized ``state``), exported in both formats."""
    cfg = tiny_pixel_cfg(tmp_path_factory.mktemp("pixels"))
    Trainer(cfg).train()
    outputs = {fmt: invoke("export", cfg.run_dir, "--format", fmt) for fmt in FILES}
    return cfg, outputs


def checkpoint_policy(cfg):
    env = build_env(cfg.env.id, 2, "cpu", cfg.env.cfg)
    policy = build_policy(cfg.policy, env.observation_space, env.action_space, "cpu")
    policy.load_state_dict(load_checkpoint(cfg.run_dir / "checkpoints" / "ckpt-000002.pt")["policy"])
    return policy.eval()


@pytest.mark.parametrize("fmt", list(FILES))
def test_export_reads_uint8_frames_and_the_vector_group_and_acts_like_the_policy(pixels, fmt):
    cfg, outputs = pixels
    assert "verified on 128 observations (stored rollout iter-000002.zarr): max |Δaction| = 0" in outputs[fmt]
    path = cfg.run_dir / "export" / FILES[fmt]
    sidecar = json.loads(path.with_name(f"{path.name}.json").read_text())
    assert sidecar["inputs"] == ["obs/pixels", "obs/state"]
    assert sidecar["observation"]["keys"] == ["pixels", "state"]
    assert sidecar["observation"]["groups"] == {
        "pixels": {"input": "obs/pixels", "shape": [2, 32, 32], "dtype": "uint8", "image": True},
        "state": {"input": "obs/state", "shape": [4], "dtype": "float32", "image": False},
    }
    norm = sidecar["normalizer"]["groups"]
    assert list(norm) == ["state"] and norm["state"]["count"] > 0  # images are not normalized

    rollout, _ = read_rollout(cfg.run_dir / "rollouts" / "iter-000002.zarr")
    obs = rollout["obs"].flatten(0, 1)  # every stored observation, bootstrap slot included: [8·17]
    with torch.no_grad():
        expected = checkpoint_policy(cfg).act(obs, deterministic=True).numpy()
    pixels_in, state_in = obs["pixels"].numpy(), obs["state"].numpy()
    if fmt == "onnx":  # onnxruntime itself, fed by input name
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert [(i.name, i.type) for i in session.get_inputs()] == [
            ("obs/pixels", "tensor(uint8)"),
            ("obs/state", "tensor(float)"),
        ]
        got = session.run(None, {"obs/pixels": pixels_in, "obs/state": state_in})[0]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(path))
        got = module(torch.from_numpy(pixels_in), torch.from_numpy(state_in)).numpy()
    assert pixels_in.dtype == np.uint8 and got.shape == expected.shape == (136,)
    np.testing.assert_array_equal(got, expected)
    assert set(expected.tolist()) == {0, 1}  # both actions occur: the file is not a constant


def test_eval_policy_onnx_scores_like_the_checkpoint_and_films_the_policys_camera(pixels):
    cfg, _ = pixels
    run_dir = cfg.run_dir
    invoke("eval", run_dir)
    checkpoint = json.loads((run_dir / "eval" / "metrics.json").read_text())
    out = invoke("eval", run_dir, "--policy", run_dir / "export" / "policy.onnx", "--video")
    shipped = json.loads((run_dir / "eval" / "policy-metrics.json").read_text())
    assert "eval/return_mean" in out and shipped["eval/episodes"] == 2
    keys = [k for k in checkpoint if k.startswith("eval/")] + ["iteration", "env_steps"]
    assert {k: shipped[k] for k in keys} == {k: checkpoint[k] for k in keys}

    # the video's first frame: the 2 eval envs' newest camera frames after the reset, 4× upscaled
    env = build_env(cfg.env.id, 2, "cpu", cfg.env.cfg)
    env.reset(seed=cfg.trainer.seed + EVAL_SEED_OFFSET)
    expected = np.concatenate(list(env.render([0, 1])), axis=1).astype(np.int16)  # [128, 256, 3]
    reader = imageio_ffmpeg.read_frames(str(run_dir / "eval" / "video-policy-iter-000002.mp4"))
    meta = next(reader)
    first = np.frombuffer(next(reader), np.uint8).reshape(meta["size"][1], meta["size"][0], 3)
    assert meta["size"] == (256, 128) and expected.max() == 255
    # H.264 blurs edges by up to ~16 levels; the frames of other reset states differ by 59 to 97
    assert np.abs(first.astype(np.int16) - expected).max() <= 32
    assert shipped["eval/video_frames"] >= 2


def test_a_file_reading_a_group_the_env_lacks_is_one_line_exit_2(pixels):
    cfg, _ = pixels
    out = invoke(
        "eval",
        cfg.run_dir,
        "--policy",
        cfg.run_dir / "export" / "policy.pt",
        "--set",
        "env.cfg.state_group=false",
        code=2,
    )
    assert out.strip().splitlines() == [
        f"Error: {cfg.run_dir / 'export' / 'policy.pt'}: reads observation group 'state'; the env has pixels"
    ]

"""The evaluator films the first eval envs without changing what it measures."""

from __future__ import annotations

import imageio_ffmpeg
import torch

from rlpipe.artifacts.video import VideoRecorder
from rlpipe.envs import build_env
from rlpipe.evaluation import Evaluator
from rlpipe.policies import build_policy


def cartpole_evaluator(video: VideoRecorder | None, env_id: str = "CartPole") -> Evaluator:
    torch.manual_seed(0)
    env = build_env(env_id, 3, "cpu")
    policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    return Evaluator(env, policy, num_episodes=2, seed=7, video=video)


def test_filming_leaves_the_metrics_unchanged_and_covers_each_filmed_episode(tmp_path):
    plain = cartpole_evaluator(None)()
    evaluator = cartpole_evaluator(VideoRecorder(2))
    filmed = evaluator(tmp_path / "video-iter-000001.mp4")
    frames = filmed.pop("eval/video_frames")
    assert filmed == plain
    assert evaluator.last_video == tmp_path / "video-iter-000001.mp4"
    # envs 0 and 1 each play 2 episodes; the video runs until the slower of them is done: one frame
    # for the reset and one per step up to its second episode's end
    lengths = _episode_lengths(cartpole_evaluator(None))
    assert frames == max(lengths[0], lengths[1])
    meta = next(imageio_ffmpeg.read_frames(str(evaluator.last_video)))
    assert meta["size"] == (640, 240) and meta["fps"] == 50


def _episode_lengths(evaluator: Evaluator) -> list[int]:
    """Steps until env i finished its 2 episodes, counted by stepping the same env and policy again."""
    done_at: dict[int, int] = {}
    counts = torch.zeros(evaluator.env.num_envs, dtype=torch.int64)
    original = evaluator.env.step

    def step(action):
        result = original(action)
        counts.add_((result.terminated | result.truncated).long())
        for i in range(len(counts)):
            if counts[i] >= 2 and i not in done_at:
                done_at[i] = step.calls + 1
        step.calls += 1
        return result

    step.calls = 0
    evaluator.env.step = step
    evaluator()
    return [done_at[i] for i in range(len(counts))]


def test_a_call_without_a_path_films_nothing_and_an_env_that_cannot_draw_only_warns(tmp_path, capsys):
    evaluator = cartpole_evaluator(VideoRecorder(1))
    assert "eval/video_frames" not in evaluator() and evaluator.last_video is None
    blind = cartpole_evaluator(VideoRecorder(1), env_id="RepeatFirst")
    first, second = blind(tmp_path / "a.mp4"), blind(tmp_path / "b.mp4")
    assert first["eval/episodes"] == second["eval/episodes"] == 6.0
    assert "eval/video_frames" not in first and list(tmp_path.iterdir()) == []
    assert capsys.readouterr().err.count("Warning: eval video off: RepeatFirst cannot render") == 1

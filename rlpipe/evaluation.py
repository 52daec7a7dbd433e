"""Evaluation episodes: a policy's mode actions on separate eval envs until each finished its episodes.

Used by the online driver's eval stage and by ``rlpipe eval``; it knows the env and the policy only
through their interfaces (``reset``/``step``; ``sample``/``sample_step``), so it sits below both drivers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from rlpipe.episode_tally import FirstEpisodes
from rlpipe.location import AnyPath

if TYPE_CHECKING:
    from rlpipe.artifacts.video import VideoRecorder
    from rlpipe.envs import BatchedEnv
    from rlpipe.policies import Policy
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["EVAL_SEED_OFFSET", "Evaluator"]

EVAL_SEED_OFFSET = 1_000_003
"""Eval envs draw from a seed stream disjoint from the training envs'."""


class _FeedforwardActor:
    """``obs [M, *obs]`` → action; nothing to carry between steps."""

    def __init__(self, policy: Policy, deterministic: bool) -> None:
        self.policy, self.deterministic = policy, deterministic

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy.act(obs, deterministic=self.deterministic)

    def episode_ended(self, finished: torch.Tensor) -> None:
        """Nothing to reset."""


class _RecurrentActor(_FeedforwardActor):
    """Carries the core state ``[M, S]`` across steps and zeroes it where an episode ended."""

    policy: TrainablePolicy
    """A recurrent policy: ``initial_state`` and ``sample_step`` besides ``Policy``'s methods."""

    def __init__(self, policy: TrainablePolicy, deterministic: bool, num_envs: int) -> None:
        super().__init__(policy, deterministic)
        self.state = policy.initial_state(num_envs)

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        action, _, _, self.state = self.policy.sample_step(obs, self.state, self.deterministic)
        return action

    def episode_ended(self, finished: torch.Tensor) -> None:
        """Zero the state of envs whose episode just ended."""
        self.state = self.state * (~finished).unsqueeze(-1).to(self.state.dtype)


class Evaluator:
    """Runs ``num_episodes`` episodes on each of the eval env's M envs with the policy's mode action.

    ``deterministic=False`` samples actions instead (from the global torch RNG).

    Each call resets the eval envs with ``seed + call index``, so an evaluation never disturbs the
    training RNG and the same checkpoint always scores the same.

    With a ``video`` recorder, a call given ``video_path`` also films the first eval envs into that
    MP4 (:attr:`last_video`); filming only reads the env state, so the metrics are the same.
    """

    def __init__(
        self,
        env: BatchedEnv,
        policy: Policy,
        num_episodes: int,
        seed: int,
        max_steps: int | None = None,
        deterministic: bool = True,
        video: VideoRecorder | None = None,
    ) -> None:
        self.env, self.policy, self.num_episodes, self.seed = env, policy, num_episodes, seed
        self.deterministic = deterministic
        self.video = video
        self.last_video: AnyPath | None = None
        """The MP4 of the latest call that filmed one (the caller clears it once logged)."""
        limit = env.max_episode_steps or 1000
        self.max_steps = max_steps or limit * num_episodes + 1
        self.calls = 0
        self.on_step: Callable[[Any, int], None] | None = None
        """Called with ``(env, step)`` after every eval env step (the ``eval_step`` event); ``None``: off."""

    def _actor(self, num_envs: int) -> _FeedforwardActor:
        if self.policy.is_recurrent:  # it has the core steps
            return _RecurrentActor(cast("TrainablePolicy", self.policy), self.deterministic, num_envs)
        return _FeedforwardActor(self.policy, self.deterministic)

    @torch.inference_mode()
    def __call__(self, video_path: AnyPath | None = None) -> dict[str, float]:
        """``eval/return_mean``, ``eval/return_std``, ``eval/length_mean``, ``eval/episodes``.

        Envs reporting ``info["success"]`` add ``eval/success_rate`` (success at any step of the
        episode: ManiSkill's ``success_once``) and ``eval/success_at_end`` (success on the episode's
        last step: the task still solved when it ends, the stricter figure for tasks whose success
        can be undone, e.g. a cube pushed through the goal).
        With ``video_path`` (and a recorder) also ``eval/video_frames``, the video's length.
        """
        filming = video_path is not None and self.video is not None and self.video.enabled
        try:
            metrics = self._episodes(video_path if filming else None)
        except BaseException:
            if self.video is not None:
                self.video.abort()  # no half-written video
            raise
        if not filming:
            return metrics
        assert self.video is not None
        self.last_video = self.video.finish()
        return metrics | ({"eval/video_frames": float(self.video.written_frames)} if self.last_video else {})

    def _episodes(self, video_path: AnyPath | None) -> dict[str, float]:
        """Step until every env finished ``k`` episodes (filming to ``video_path`` if given); the metrics."""
        m, k = self.env.num_envs, self.num_episodes
        obs = self.env.reset(seed=self.seed + self.calls)
        self.calls += 1
        video = None
        if video_path is not None and self.video is not None:
            video = self.video
            video.start(self.env, video_path)
        episodes = FirstEpisodes(m, k, self.env.device)
        live = torch.zeros(m, dtype=torch.int64, device=self.env.device)  # per-step count, for the video
        was_training = self.policy.training
        self.policy.eval()
        act = self._actor(m)
        for step in range(self.max_steps):
            result = self.env.step(act(obs))
            finished = result.terminated | result.truncated
            success = result.info.get("success")
            episodes.add(result.reward, finished, None if success is None else success.bool())
            act.episode_ended(finished)
            obs = result.obs
            if self.on_step is not None:
                self.on_step(self.env, step)
            if video is not None and video.recording:
                live += (finished & (live < k)).long()
                video.capture(self.env, live, k)
            if episodes.pending == 0 and bool((episodes.count >= k).all()):
                break
        episodes.flush()
        self.policy.train(was_training)
        valid = episodes.slots < episodes.count.unsqueeze(1)
        ep_returns, ep_lengths = episodes.returns[valid], episodes.lengths[valid]
        if ep_returns.numel() == 0:
            return {"eval/episodes": 0.0}
        success, at_end = episodes.success[valid], episodes.at_end[valid]
        rate = (
            {
                "eval/success_rate": float(success.float().mean()),
                "eval/success_at_end": float(at_end.float().mean()),
            }
            if episodes.reports_success
            else {}
        )
        return rate | {
            "eval/return_mean": float(ep_returns.mean()),
            "eval/return_std": float(ep_returns.std(unbiased=False)),
            "eval/length_mean": float(ep_lengths.mean()),
            "eval/episodes": float(ep_returns.numel()),
        }

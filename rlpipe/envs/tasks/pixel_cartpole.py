"""PixelCartPole: CartPole seen through a small grayscale camera, rendered in batch by torch ops.

The physics, reward, termination and time limit are :class:`~rlpipe.envs.tasks.cartpole.CartPole`'s;
the observation is an image group ``pixels`` uint8 ``[frame_stack, size, size]``: the last
``frame_stack`` frames, oldest first, so velocities can be read from differences between frames.
The frames are drawn from the physics state of the last ``frame_stack`` steps, which the env keeps
in its state (``[N, 4 + 2·(frame_stack − 1)]``: the CartPole state, then cart position and pole
angle of the earlier frames, newest first), so auto-reset, group resets and ``state_dict`` round
trips work unchanged and the images are a pure function of the state.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.registry import register_env
from rlpipe.envs.tasks.cartpole import OBS_HIGH, X_THRESHOLD, CartPole
from rlpipe.envs.tasks.raster import box_coverage, capsule_coverage

__all__ = ["PixelCartPole"]

POLE_DRAWN = 0.45
"""Drawn pole length as a share of the image height (longer than to scale: a ±12° pole must move
pixels)."""
CART_LEVEL = 0.8
"""Height of the cart's centre, as a share of the image height from the top."""
CART_GRAY, POLE_GRAY = 255.0, 160.0
"""Intensities of the cart and the pole on the black background."""
VIDEO_SCALE = 4
"""``render`` shows the newest frame upscaled this many times (the policy's own camera)."""


@register_env("PixelCartPole")
class PixelCartPole(CartPole):
    """CartPole from pixels: observation ``{"pixels": uint8 [N, frame_stack, size, size]}``.

    ``state_group: true`` adds the CartPole state as a vector group ``state`` ``[N, 4]`` float32
    (for an asymmetric critic, or to test images beside vectors). Actions, rewards and episodes are
    CartPole's.
    """

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        max_episode_steps: int | None = 500,
        physics_dtype: str = "float32",
        size: int = 64,
        frame_stack: int = 3,
        state_group: bool = False,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or not 16 <= size <= 256:
            raise ValueError(f"size: got {size!r}; accepted: an int from 16 to 256 (pixels per side)")
        if isinstance(frame_stack, bool) or not isinstance(frame_stack, int) or not 1 <= frame_stack <= 8:
            raise ValueError(f"frame_stack: got {frame_stack!r}; accepted: an int from 1 to 8")
        if not isinstance(state_group, bool):
            raise ValueError(f"state_group: got {state_group!r}; accepted: true, false")
        self.size, self.frame_stack, self.state_group = size, frame_stack, state_group
        self.state_dim = CartPole.state_dim + 2 * (frame_stack - 1)
        spaces: dict[str, gym.spaces.Space] = {
            "pixels": gym.spaces.Box(0, 255, (frame_stack, size, size), np.uint8)
        }
        self.frame_channels = {"pixels": 1}  # grayscale: one channel per stacked frame
        if state_group:
            spaces["state"] = gym.spaces.Box(-OBS_HIGH, OBS_HIGH, dtype=np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        dev = torch.device(device)
        self._xs = (torch.arange(size, device=dev, dtype=torch.float32) + 0.5).view(1, 1, -1)
        self._ys = (torch.arange(size, device=dev, dtype=torch.float32) + 0.5).view(1, -1, 1)
        super().__init__(num_envs, device, max_episode_steps=max_episode_steps, physics_dtype=physics_dtype)

    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, S]``: CartPole's start state, its position and angle repeated as the earlier frames."""
        u = torch.rand(n, CartPole.state_dim, generator=generator, device=self.device, dtype=self.dtype)
        start = u.mul_(self._k.init_width).sub_(self._k.init_bound)  # CartPole's draw of its 4 numbers
        return torch.cat((start, start[:, 0::2].repeat(1, self.frame_stack - 1)), dim=1)

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """CartPole's step of ``state[:, :4]``; the frame history shifts by one (newest first)."""
        physics, history = state[:, :4], state[:, 4:]
        next_physics, reward, terminated = super()._dynamics(physics, action)
        shifted = torch.cat((physics[:, 0::2], history[:, : history.shape[1] - 2]), dim=1)
        return torch.cat((next_physics, shifted), dim=1), reward, terminated

    def _observe(self, state: torch.Tensor) -> TensorDict:
        """TensorDict ``[N]``: ``pixels`` ``[N, frame_stack, size, size]`` uint8 (oldest first), ``state``."""
        n, k = state.shape[0], self.frame_stack
        poses = torch.cat((state[:, 0:4:2], state[:, 4:]), dim=1).float().view(n, k, 2).flip(1)
        frames = self._draw(poses[..., 0].reshape(-1), poses[..., 1].reshape(-1))
        fields = {"pixels": frames.view(n, k, self.size, self.size)}
        if self.state_group:
            fields["state"] = state[:, :4].to(torch.float32, copy=True)
        return TensorDict(fields, batch_size=[n], device=state.device)

    def _draw(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """``[k, size, size]`` uint8 frames of carts at ``x`` ``[k]``, poles at angle ``theta`` ``[k]``."""
        size = self.size
        scale = size / (2 * X_THRESHOLD)  # the visible track is ±2.4
        cart = torch.stack((size / 2 + scale * x, torch.full_like(x, CART_LEVEL * size)), -1)
        tip = cart + POLE_DRAWN * size * torch.stack((torch.sin(theta), -torch.cos(theta)), -1)
        half = (max(0.07 * size, 2.0), max(0.04 * size, 1.0))
        pole = capsule_coverage(self._xs, self._ys, cart, tip, max(0.02 * size, 1.0))
        body = box_coverage(self._xs, self._ys, cart, half)
        image = torch.maximum(body.mul_(CART_GRAY), pole.mul_(POLE_GRAY))
        return image.round_().to(torch.uint8)

    def render(self, env_ids: list[int]) -> np.ndarray:
        """``[k, 4·size, 4·size, 3]`` uint8: the newest frame of envs ``env_ids``, as the policy sees it."""
        obs = self._observe(self.state[torch.as_tensor(env_ids, device=self.device)])
        frame = obs["pixels"][:, -1].repeat_interleave(VIDEO_SCALE, 1).repeat_interleave(VIDEO_SCALE, 2)
        return frame.unsqueeze(-1).expand(-1, -1, -1, 3).cpu().numpy()

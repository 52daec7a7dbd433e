"""The reference side of ``throughput.py`` and ``scaling.py``: a plain torch PPO iteration on torch CartPole.

Not a benchmark itself: the two scripts time it beside rlpipe doing the same work. It is what one writes
by hand in the CleanRL style: time-major ``[T, N]`` buffers, the same env class as rlpipe
(``rlpipe.envs.CartPole``), its own Categorical actor and critic, collection under ``inference_mode``,
values of the T+1 observations in one batched forward, the exact time-limit bootstrap computed only for
the transitions that were truncated, GAE, advantage normalization, then epochs × shuffled minibatches with
the clipped surrogate, value MSE, entropy, Adam and grad clipping. Hyperparameters come from the same
resolved config as rlpipe's.
"""

from __future__ import annotations

import torch
from _bench import synchronize, timed
from torch import nn
from torch.distributions import Categorical

from rlpipe.algorithms.ppo import PPOCfg
from rlpipe.config import RunConfig
from rlpipe.envs import CartPole


def mlp(in_dim: int, hidden: list[int], out_dim: int) -> nn.Sequential:
    sizes = [in_dim, *hidden]
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(sizes[-1], out_dim))


class PlainPPO:
    """A CleanRL-style PPO iteration on ``rlpipe.envs.CartPole``: time-major ``[T, N]`` buffers."""

    def __init__(self, cfg: RunConfig, hidden: list[int], device: torch.device) -> None:
        n, t = cfg.trainer.num_envs, cfg.trainer.buffer_size
        self.hp = PPOCfg.model_validate(cfg.algorithm.cfg)
        self.n, self.t, self.device = n, t, device
        torch.manual_seed(cfg.trainer.seed)
        self.env = CartPole(n, device)
        self.obs = self.env.reset(seed=cfg.trainer.seed)
        self.actor = mlp(4, hidden, 2).to(device)
        self.critic = mlp(4, hidden, 1).to(device)
        self.params = [*self.actor.parameters(), *self.critic.parameters()]
        self.optimizer = torch.optim.Adam(self.params, lr=self.hp.learning_rate)
        zeros = lambda *shape, dtype=torch.float32: torch.zeros(*shape, dtype=dtype, device=device)
        self.obs_buf, self.final_obs = zeros(t + 1, n, 4), zeros(t, n, 4)
        self.act_buf = zeros(t, n, dtype=torch.int64)
        self.logp_buf, self.rew_buf, self.val_buf = zeros(t, n), zeros(t, n), zeros(t + 1, n)
        self.final_value = zeros(t, n)
        self.term_buf, self.trunc_buf = zeros(t, n, dtype=torch.bool), zeros(t, n, dtype=torch.bool)

    def iteration(self) -> tuple[float, float]:
        """One collect + update; returns ``(collect_s, update_s)``."""
        collect_s, _ = timed(self.collect)
        update_s, _ = timed(self.update)
        return collect_s, update_s

    @torch.inference_mode()
    def collect(self) -> None:
        obs = self.obs
        for t in range(self.t):
            self.obs_buf[t] = obs
            dist = Categorical(logits=self.actor(obs))
            action = dist.sample()
            self.act_buf[t], self.logp_buf[t] = action, dist.log_prob(action)
            step = self.env.step(action)
            self.rew_buf[t], self.term_buf[t] = step.reward, step.terminated
            self.trunc_buf[t] = step.truncated
            self.final_obs[t] = step.final_obs
            obs = step.obs
        self.obs_buf[self.t] = obs
        self.obs = obs
        self.val_buf.copy_(self.critic(self.obs_buf.flatten(0, 1)).view(self.t + 1, self.n))
        bootstrap = self.trunc_buf & ~self.term_buf  # exact time-limit bootstrap, only where needed
        self.final_value.zero_()
        self.final_value[bootstrap] = self.critic(self.final_obs[bootstrap]).squeeze(-1)
        synchronize(self.device)

    def advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE ``[T, N]``: δ_t = r_t + γ(V_final,t + (1−d_t)V_{t+1}) − V_t; A_t = δ_t + γλ(1−d_t)A_{t+1}."""
        not_done = (~(self.term_buf | self.trunc_buf)).float()
        value = self.val_buf
        delta = self.rew_buf + self.hp.gamma * (self.final_value + not_done * value[1:]) - value[:-1]
        advantage = torch.empty_like(delta)
        running = torch.zeros_like(delta[0])
        for t in range(self.t - 1, -1, -1):
            running = delta[t] + self.hp.gamma * self.hp.gae_lambda * not_done[t] * running
            advantage[t] = running
        return advantage, advantage + value[:-1]

    def update(self) -> None:
        advantage, returns = self.advantages()
        obs, act, logp = self.obs_buf[:-1].reshape(-1, 4), self.act_buf.reshape(-1), self.logp_buf.reshape(-1)
        adv, ret = advantage.reshape(-1), returns.reshape(-1)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        total = obs.shape[0]
        for _ in range(self.hp.n_epochs):
            perm = torch.randperm(total, device=self.device)
            for start in range(0, total, self.hp.batch_size):
                idx = perm[start : start + self.hp.batch_size]
                self.minibatch_step(obs[idx], act[idx], logp[idx], adv[idx], ret[idx])
        synchronize(self.device)

    def minibatch_step(
        self,
        obs: torch.Tensor,
        act: torch.Tensor,
        old_logp: torch.Tensor,
        adv: torch.Tensor,
        ret: torch.Tensor,
    ) -> None:
        dist = Categorical(logits=self.actor(obs))
        ratio = (dist.log_prob(act) - old_logp).exp()
        clip = self.hp.clip_coef
        policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
        value_loss = (self.critic(obs).squeeze(-1) - ret).pow(2).mean()
        loss = policy_loss + self.hp.vf_coef * value_loss - self.hp.ent_coef * dist.entropy().mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, self.hp.max_grad_norm)
        self.optimizer.step()

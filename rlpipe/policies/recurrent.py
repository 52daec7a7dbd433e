"""``RecurrentActorCritic``: an LSTM/GRU core shared by an actor and a critic MLP.

The core's state travels as one flat tensor ``[B, S]`` (LSTM: ``h`` and ``c`` of every layer,
``S = 2·layers·hidden``; GRU: ``h``, ``S = layers·hidden``), so the collector can store it in the
rollout (``recurrent_state``) and the update can re-run the core from it.

* ``sample_step(obs, state)``: one step of collection → action, log_prob, value, next state.
* ``step_value(obs, state)``: V of ``obs`` seen with ``state`` (bootstrap and final observations).
* ``evaluate_sequence(obs_seq, action_seq, start_state, done_seq)``: re-run ``[B, L]`` sequences
  from their start states, zeroing the state after every done (truncated BPTT).

The feedforward ``distribution``/``value`` treat each observation as the first of an episode (a
zero state); the collector and PPO dispatch on ``is_recurrent`` and use the methods above.
"""

from __future__ import annotations

from typing import TypeAlias

import torch
from tensordict import TensorDict
from torch import nn
from torch.distributions import Distribution
from torch.nn import functional

from rlpipe.config import ConfigError, PolicyCfg
from rlpipe.policies.heads import ActionHead
from rlpipe.policies.mlp import build_mlp_from_cfg
from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["RecurrentActorCritic", "RecurrentCore"]

Hidden: TypeAlias = "torch.Tensor | tuple[torch.Tensor, torch.Tensor]"
"""torch's recurrent hidden state ``[layers, B, H]``: a GRU's tensor, an LSTM's pair ``(h, c)``."""

CELLS: dict[str, type[nn.Module]] = {"lstm": nn.LSTM, "gru": nn.GRU}


class RecurrentCore(nn.Module):
    """One step of a stacked LSTM/GRU over flat states: ``([B, in], [B, S])`` → ``([B, H], [B, S])``."""

    def __init__(self, kind: str, in_dim: int, hidden_size: int, num_layers: int) -> None:
        super().__init__()
        self.kind, self.hidden_size, self.num_layers = kind, hidden_size, num_layers
        self.rnn = CELLS[kind](in_dim, hidden_size, num_layers)

    @property
    def state_size(self) -> int:
        """S: floats of one env's state."""
        return (2 if self.kind == "lstm" else 1) * self.num_layers * self.hidden_size

    def _unpack(self, state: torch.Tensor) -> Hidden:
        """``[B, S]`` → torch's ``[layers, B, H]`` hidden (a pair ``(h, c)`` for LSTM)."""
        b = state.shape[0]
        parts = state.reshape(b, -1, self.num_layers, self.hidden_size).permute(1, 2, 0, 3).contiguous()
        return (parts[0], parts[1]) if self.kind == "lstm" else parts[0]

    def _pack(self, hidden: Hidden) -> torch.Tensor:
        parts = torch.stack(hidden if isinstance(hidden, tuple) else (hidden,))  # [k, layers, B, H]
        return parts.permute(2, 0, 1, 3).reshape(parts.shape[2], -1)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Output of the last layer ``[B, H]`` and the next state ``[B, S]``.

        Eager: torch's fused LSTM/GRU kernel. Inside ``torch.compile`` (``trainer.compile``): the
        same cell equations written out (:meth:`cell_step`), which compile into one graph where
        torch's RNN modules do not.
        """
        if torch.compiler.is_compiling():
            return self.cell_step(x, state)
        out, hidden = self.rnn(x.unsqueeze(0), self._unpack(state))
        return out.squeeze(0), self._pack(hidden)

    def cell_step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` as the LSTM/GRU equations on the module's weights, layer by layer.

        Equal to torch's kernel up to float rounding (the gate sums are added in another order).
        """
        hidden, rnn = self._unpack(state), self.rnn
        h_all, c_all = hidden if isinstance(hidden, tuple) else (hidden, None)
        next_h, next_c = [], []
        for layer in range(self.num_layers):
            w_ih, w_hh = getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")
            b_ih, b_hh = getattr(rnn, f"bias_ih_l{layer}", None), getattr(rnn, f"bias_hh_l{layer}", None)
            gi, gh = functional.linear(x, w_ih, b_ih), functional.linear(h_all[layer], w_hh, b_hh)
            if c_all is None:  # GRU: reset, update, new gates
                r_i, z_i, n_i = gi.chunk(3, -1)
                r_h, z_h, n_h = gh.chunk(3, -1)
                reset, update = torch.sigmoid(r_i + r_h), torch.sigmoid(z_i + z_h)
                new = torch.tanh(n_i + reset * n_h)
                x = (1.0 - update) * new + update * h_all[layer]
            else:  # LSTM: input, forget, cell, output gates
                i, f, g, o = (gi + gh).chunk(4, -1)
                c = torch.sigmoid(f) * c_all[layer] + torch.sigmoid(i) * torch.tanh(g)
                x = torch.sigmoid(o) * torch.tanh(c)
                next_c.append(c)
            next_h.append(x)
        packed = (torch.stack(next_h), torch.stack(next_c)) if c_all is not None else torch.stack(next_h)
        return x, self._pack(packed)


class RecurrentActorCritic(TrainablePolicy):
    """Recurrent core (``policy.recurrent``) → actor MLP → action head, and → critic MLP → V."""

    is_recurrent = True

    def __init__(
        self,
        core: RecurrentCore,
        actor: nn.Module,
        critic: nn.Module,
        head: ActionHead,
        device: torch.device | str,
    ) -> None:
        super().__init__()
        self.core, self.actor, self.critic, self.head = core, actor, critic, head
        self.device = torch.device(device)
        self.to(self.device)

    @classmethod
    def from_cfg(
        cls, cfg: PolicyCfg, obs_dim: int, head: ActionHead, device: torch.device | str
    ) -> RecurrentActorCritic:
        """Core from ``cfg.recurrent``; actor and critic MLPs read its ``hidden_size`` features."""
        rec = cfg.recurrent
        if cfg.critic is None:
            raise ConfigError(f"policy.critic: required by {cfg.name!r}")
        core = RecurrentCore(rec.type, obs_dim, rec.hidden_size, rec.num_layers)
        actor = build_mlp_from_cfg(cfg.actor.to_dict(), rec.hidden_size, head.out_dim, "policy.actor")
        critic = build_mlp_from_cfg(cfg.critic.to_dict(), rec.hidden_size, 1, "policy.critic")
        return cls(core, actor, critic, head, device)

    @property
    def state_size(self) -> int:
        """S: floats of one env's recurrent state."""
        return self.core.state_size

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros ``[batch, S]`` (the state at an episode start)."""
        return torch.zeros(batch, self.state_size, device=self.device)

    def _features(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.core(self.actor_obs(obs).flatten(1), state)

    def sample_step(
        self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B], value [B], next_state [B, S])`` for ``obs`` ``[B, *obs]``."""
        features, next_state = self._features(obs, state)
        dist = self.head.distribution(self.actor(features))
        action = self.head.mode(dist) if deterministic else dist.sample()
        return action, dist.log_prob(action), self.critic(features).squeeze(-1), next_state

    def step_value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """V of ``obs`` ``[B, *obs]`` seen with ``state`` ``[B, S]``: ``[B]``."""
        return self.critic(self._features(obs, state)[0]).squeeze(-1)

    def unroll(
        self, obs_seq: torch.Tensor, start_state: torch.Tensor, done_seq: torch.Tensor
    ) -> torch.Tensor:
        """Core outputs ``[B, L, H]`` of ``obs_seq`` ``[B, L, *obs]``; the state is zeroed after each done."""
        state, outputs = start_state, []
        for i in range(obs_seq.shape[1]):
            out, state = self._features(obs_seq[:, i], state)
            outputs.append(out)
            state = state * (~done_seq[:, i]).unsqueeze(-1).to(state.dtype)
        return torch.stack(outputs, 1)

    def evaluate_sequence(
        self,
        obs_seq: torch.Tensor,
        action_seq: torch.Tensor,
        start_state: torch.Tensor,
        done_seq: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)``, each ``[B, L]``, of the stored actions ``[B, L, *act]``."""
        b, length = done_seq.shape
        features = self.unroll(obs_seq, start_state, done_seq).flatten(0, 1)
        dist = self.head.distribution(self.actor(features))
        log_prob = dist.log_prob(action_seq.flatten(0, 1)).view(b, length)
        value = self.critic(features).view(b, length)
        return log_prob, dist.entropy().view(b, length), value

    def distribution(self, obs: torch.Tensor) -> Distribution:
        """π(·|obs) from a zero state (each observation as the first of an episode)."""
        features, _ = self._features(obs, self.initial_state(obs.shape[0]).to(_dtype(obs)))
        return self.head.distribution(self.actor(features))

    def deterministic_action(self, dist: Distribution) -> torch.Tensor:
        """The head's mode: argmax, Gaussian mean or the Beta's mapped mode."""
        return self.head.mode(dist)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(obs) ``[B]`` from a zero state."""
        return self.step_value(obs, self.initial_state(obs.shape[0]).to(_dtype(obs)))


def _dtype(obs: torch.Tensor | TensorDict) -> torch.dtype:
    """The float dtype of ``obs`` (dict observations are float32)."""
    return torch.float32 if isinstance(obs, TensorDict) else obs.dtype

"""``recurrent_actor_critic``: flat states, resets on done, truncated BPTT, collection ↔ update agreement."""

from __future__ import annotations

import pytest
import torch

from rlpipe.algorithms.sequences import sequence_batch
from rlpipe.collector import Collector
from rlpipe.envs import build_env
from rlpipe.policies import RecurrentActorCritic, RecurrentCore, build_policy


def recurrent_policy(kind: str = "lstm", layers: int = 1, env=None):
    torch.manual_seed(0)
    env = env or build_env("RepeatFirst", 4, "cpu")
    small = {"network_cfg": {"hidden_sizes": [8]}}
    block = {
        "name": "recurrent_actor_critic",
        "actor": small,
        "critic": small,
        "recurrent": {"type": kind, "hidden_size": 8, "num_layers": layers},
    }
    return build_policy(block, env.observation_space, env.action_space, "cpu")


@pytest.mark.parametrize(("kind", "layers", "size"), [("lstm", 2, 2 * 2 * 8), ("gru", 1, 8)])
def test_flat_state_round_trips_through_torch_hidden(kind, layers, size):
    core = RecurrentCore(kind, 3, 8, layers)
    assert core.state_size == size
    state = torch.randn(5, size)
    torch.testing.assert_close(core._pack(core._unpack(state)), state)
    x = torch.randn(5, 3)
    out, nxt = core(x, state)
    ref_out, ref_hidden = core.rnn(x.unsqueeze(0), core._unpack(state))
    torch.testing.assert_close(out, ref_out[0])
    torch.testing.assert_close(nxt, core._pack(ref_hidden))


def test_policy_is_registered_recurrent_and_remembers():
    policy = recurrent_policy()
    assert isinstance(policy, RecurrentActorCritic) and policy.is_recurrent
    obs = torch.tensor([[1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]])
    _, _, _, state = policy.sample_step(obs, policy.initial_state(2))
    blank = torch.zeros(2, 3)
    v_after_cue = policy.step_value(blank, state)
    assert not torch.allclose(v_after_cue[0], v_after_cue[1])  # same obs, different memories


def test_unroll_resets_the_state_after_a_done():
    policy = recurrent_policy("gru")
    obs = torch.randn(2, 4, 3)
    done = torch.tensor([[False, True, False, False], [False, False, False, False]])
    start = torch.randn(2, policy.state_size)
    with torch.no_grad():
        out = policy.unroll(obs, start, done)
        fresh = policy.unroll(obs[:, 2:], policy.initial_state(2), torch.zeros(2, 2, dtype=torch.bool))
    torch.testing.assert_close(out[0, 2:], fresh[0])  # after the done: as from a zero state
    assert not torch.allclose(out[1, 2:], fresh[1])  # no done: the history matters


def test_truncated_bptt_gradients_reach_the_first_step_but_not_across_a_done():
    policy = recurrent_policy("lstm")
    obs = torch.randn(2, 5, 3, requires_grad=True)
    action = torch.zeros(2, 5, dtype=torch.int64)
    done = torch.zeros(2, 5, dtype=torch.bool)
    done[1, 1] = True  # env 1's episode ends after step 1
    log_prob, _, value = policy.evaluate_sequence(obs, action, policy.initial_state(2), done)
    (log_prob[:, -1] + value[:, -1]).sum().backward()
    assert obs.grad[0, 0].abs().sum() > 0  # the last step's loss depends on step 0
    assert obs.grad[1, :2].abs().sum() == 0  # cut by the done
    assert obs.grad[1, 2].abs().sum() > 0


def test_collector_stores_states_at_sequence_starts_zeroed_after_done():
    env = build_env("RepeatFirst", 4, "cpu", {"length": 3})
    collector = Collector(
        env, recurrent_policy(env=env), horizon=6, seed=0, seq_len=2, seqs_per_state_reset=-1
    )
    rollout, _ = collector()
    state = rollout["recurrent_state"]
    assert state.shape == (4, 7, collector.policy.state_size)
    assert state[:, 1::2].abs().sum() == 0  # only sequence starts 0, 2, 4 are written
    assert state[:, 0].abs().sum() == 0  # first rollout after the env reset
    assert state[:, 2].abs().sum(-1).gt(0).all()  # mid-episode (episode steps 0, 1, 2 | 0 …)
    # episodes of 3 steps end at t = 2 and 5: t = 4 is mid-episode, t = 6 would start one
    assert torch.equal(collector.recurrent_state, torch.zeros_like(collector.recurrent_state))


def test_state_resets_every_seq_len_times_seqs_per_state_reset_steps_or_carries_over():
    env = build_env("RepeatFirst", 4, "cpu", {"length": 5})
    periodic = Collector(env, recurrent_policy(env=env), horizon=8, seed=0, seq_len=2, seqs_per_state_reset=2)
    rollout, _ = periodic()
    assert rollout["recurrent_state"][:, [0, 4]].abs().sum() == 0  # reset at t = 0 and 4
    assert rollout["recurrent_state"][:, 2].abs().sum(-1).gt(0).all()
    carry = Collector(env, recurrent_policy(env=env), horizon=8, seed=0, seq_len=2, seqs_per_state_reset=-1)
    carry()
    last = carry.recurrent_state.clone()  # 8 steps into 5-step episodes: mid-episode, non-zero
    assert last.abs().sum(-1).gt(0).all()
    second, _ = carry()
    torch.testing.assert_close(second["recurrent_state"][:, 0], last)


@pytest.mark.parametrize("seq_len", [2, 4, None])
def test_update_recomputes_the_collected_log_probs_and_values(seq_len):
    env = build_env("RepeatFirst", 3, "cpu", {"length": 3})
    policy = recurrent_policy("lstm", layers=2, env=env)
    rollout, _ = Collector(env, policy, horizon=8, seed=1, seq_len=seq_len, seqs_per_state_reset=-1)()
    batch = sequence_batch(rollout, ("obs", "action", "sample_log_prob", "value"), seq_len)
    length = seq_len or 8
    assert batch["obs"].shape == (3 * 8 // length, length, 3)
    with torch.no_grad():
        log_prob, _, value = policy.evaluate_sequence(
            batch["obs"], batch["action"], batch["start_state"], batch["done"]
        )
    torch.testing.assert_close(log_prob, batch["sample_log_prob"])
    torch.testing.assert_close(value, batch["value"])
    second = rollout["obs"][0, length] if length < 8 else rollout["obs"][1, 0]  # env-major order
    torch.testing.assert_close(batch["obs"][1, 0], second)


def test_collector_state_survives_a_state_dict_round_trip():
    env = build_env("RepeatFirst", 2, "cpu", {"length": 5})
    collector = Collector(env, recurrent_policy(env=env), horizon=4, seed=0, seq_len=2)
    collector()
    other = Collector(
        build_env("RepeatFirst", 2, "cpu", {"length": 5}), collector.policy, horizon=4, seed=0, seq_len=2
    )
    other.load_state_dict(collector.state_dict())
    torch.testing.assert_close(other.recurrent_state, collector.recurrent_state)
    assert other.recurrent_state.abs().sum() > 0

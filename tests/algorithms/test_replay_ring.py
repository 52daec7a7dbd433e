"""The replay ring: n-step targets against a plain loop, slots, wrap-around, bootstraps, rebuilds."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlpipe.algorithms.replay_ring import ReplayRing, n_step_targets
from rlpipe.rollout import gather_final_obs

N, T, GAMMA = 3, 6, 0.9
CPU = torch.device("cpu")


def brute_force(reward, terminated, truncated, gamma: float, n_step: int):
    """The n-step targets of every ``(env, t)`` with Python loops: ``(ret, discount, t_end, final)``."""
    n, horizon = reward.shape
    ret, discount = torch.zeros(n, horizon, dtype=reward.dtype), torch.zeros(n, horizon, dtype=reward.dtype)
    t_end, final = torch.zeros(n, horizon, dtype=torch.int64), torch.zeros(n, horizon, dtype=torch.bool)
    for env in range(n):
        for t in range(horizon):
            total, end = 0.0, t
            for k in range(n_step):
                step = t + k
                if step >= horizon:  # the rollout ends: bootstrap from obs[T]
                    break
                total += gamma**k * float(reward[env, step])
                end = step
                if terminated[env, step] or truncated[env, step]:
                    break
            ret[env, t], t_end[env, t] = total, end
            ended_terminated = bool(terminated[env, end])
            discount[env, t] = 0.0 if ended_terminated else gamma ** (end - t + 1)
            final[env, t] = bool(truncated[env, end]) and not ended_terminated
    return ret, discount, t_end, final


def random_flags(seed: int, n: int = N, horizon: int = T, p: float = 0.2):
    gen = torch.Generator().manual_seed(seed)
    reward = torch.randn(n, horizon, generator=gen, dtype=torch.float64)
    terminated = torch.rand(n, horizon, generator=gen) < p
    truncated = torch.rand(n, horizon, generator=gen) < p  # both at once happens too
    return reward, terminated, truncated


@pytest.mark.parametrize("n_step", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_n_step_targets_equal_a_plain_loop(n_step, seed):
    reward, terminated, truncated = random_flags(seed, n=5, horizon=12, p=0.15)
    targets = n_step_targets(reward, terminated, truncated, GAMMA, n_step)
    ret, discount, t_end, final = brute_force(reward, terminated, truncated, GAMMA, n_step)
    torch.testing.assert_close(targets.ret, ret, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(targets.discount, discount, rtol=1e-12, atol=1e-12)
    assert torch.equal(targets.boot_t, t_end) and torch.equal(targets.boot_final, final)
    if n_step > 1:  # the cases the loop stops on all occur: a termination, a truncation, the rollout end
        assert (discount == 0).any() and final.any() and (t_end == 11).sum() > 5


def test_a_one_step_target_is_the_reward_and_gamma_unless_terminated():
    reward, terminated, truncated = random_flags(3)
    targets = n_step_targets(reward, terminated, truncated, GAMMA, 1)
    assert torch.equal(targets.ret, reward) and torch.equal(targets.boot_t, torch.arange(T).expand(N, T))
    expected = torch.where(terminated, torch.zeros((), dtype=torch.float64), GAMMA)
    assert torch.equal(targets.discount, expected)


def marker(position: int, env: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """An observation value naming where it was stored: ``position·10000 + env·100 + t``."""
    return (position * 10000 + env * 100 + t).to(torch.float32)


def make_rollout(position: int, seed: int | None = None, as_dict: bool = False):
    """A ``[N, T+1]`` rollout whose obs name their ``(position, env, t)``, and its sparse final obs.

    A final observation is the negative marker of its slot, so a bootstrap from it is recognizable.
    """
    reward, terminated, truncated = random_flags(position if seed is None else seed, p=0.25)
    env = torch.arange(N).view(N, 1).expand(N, T + 1)
    t = torch.arange(T + 1).view(1, T + 1).expand(N, T + 1)
    code = marker(position, env, t)
    obs = torch.stack([code, code + 0.5], dim=-1)  # [N, T+1, 2]

    def pad(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.zeros(N, 1, dtype=x.dtype)], dim=1)

    rollout = TensorDict(
        {
            "action": torch.randn(N, T + 1, 1, generator=torch.Generator().manual_seed(position)),
            "reward": pad(reward.float()),
            "terminated": pad(terminated),
            "truncated": pad(truncated),
        },
        batch_size=[N, T + 1],
    )
    dense_final = -obs[:, :T]
    done = terminated | truncated
    if as_dict:
        rollout["obs"] = TensorDict({"a": obs, "b": obs[..., :1] * 2}, batch_size=[N, T + 1])
        groups = TensorDict({"a": dense_final, "b": dense_final[..., :1] * 2}, batch_size=[N, T])
        return rollout, gather_final_obs(groups, done)
    rollout["obs"] = obs
    return rollout, gather_final_obs(dense_final, done)


def filled_ring(capacity: int, positions: range, n_step: int = 3, as_dict: bool = False) -> ReplayRing:
    ring = ReplayRing(capacity, GAMMA, n_step, CPU)
    for position in positions:
        ring.add(*make_rollout(position, as_dict=as_dict), position)
    return ring


def decode(code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    code = code.round().long()
    return code // 10000, (code % 10000) // 100, code % 100


def test_rollouts_go_to_slot_position_minus_one_mod_capacity_and_overwrite_the_oldest():
    ring = filled_ring(3, range(1, 6))
    assert [ring.slot_of(p) for p in range(1, 8)] == [0, 1, 2, 0, 1, 2, 0]
    held = {int(decode(ring.obs[slot, 0, 0, 0])[0]): slot for slot in range(3)}
    assert held == {4: 0, 5: 1, 3: 2}  # rollouts 1 and 2 were overwritten by 4 and 5
    assert ring.filled == 3 and ring.newest == 5 and ring.transitions == 3 * N * T


def test_sampling_draws_only_from_filled_slots_and_reaches_all_of_them():
    ring = filled_ring(4, range(1, 3))
    batch = ring.sample(4000, torch.Generator().manual_seed(0))
    position, env, t = decode(batch["obs"][:, 0])
    assert set(position.tolist()) == {1, 2} and set(env.tolist()) == set(range(N))
    assert set(t.tolist()) == set(range(T))  # never the bootstrap slot T
    assert ring.transitions == 2 * N * T
    with pytest.raises(RuntimeError, match="before any rollout"):
        ReplayRing(2, GAMMA, 1, CPU).sample(4, torch.Generator())


@pytest.mark.parametrize("as_dict", [False, True], ids=["tensor", "dict"])
def test_samples_carry_their_n_step_targets_and_bootstrap_observation(as_dict):
    ring = filled_ring(3, range(1, 6), n_step=3, as_dict=as_dict)
    batch = ring.sample(3000, torch.Generator().manual_seed(1))
    obs, next_obs = batch["obs"], batch["next_obs"]
    if as_dict:
        assert isinstance(next_obs, TensorDict) and isinstance(obs, TensorDict)
        assert torch.equal(next_obs["b"], next_obs["a"][:, :1] * 2) and torch.equal(
            obs["b"], obs["a"][:, :1] * 2
        )
        obs, next_obs = obs["a"], next_obs["a"]
    position, env, t = decode(obs[:, 0])
    targets = {p: brute_force(*random_flags(p, p=0.25), GAMMA, 3) for p in set(position.tolist())}
    finals = 0
    for row in range(len(position)):
        p, e, step = int(position[row]), int(env[row]), int(t[row])
        ret, discount, t_end, final = (x[e, step] for x in targets[p])
        assert float(batch["ret"][row]) == pytest.approx(float(ret), abs=1e-5)
        assert float(batch["discount"][row]) == pytest.approx(float(discount), abs=1e-6)
        end = int(t_end)
        if bool(final):  # a truncation: the observation the episode really ended in
            expected, finals = -marker(p, torch.tensor(e), torch.tensor(end)), finals + 1
        else:
            expected = marker(p, torch.tensor(e), torch.tensor(end + 1))
        assert float(next_obs[row, 0]) == float(expected)
        assert float(next_obs[row, 1]) == float(expected + (-0.5 if bool(final) else 0.5))
    assert finals > 50  # both branches were checked


def test_positions_that_skip_or_rollouts_that_do_not_fit_are_refused():
    ring = filled_ring(3, range(1, 3))
    with pytest.raises(ValueError, match="rollout 4 added after rollout 2"):
        ring.add(*make_rollout(4), 4)
    with pytest.raises(ValueError, match="rollout 2 added after rollout 2"):
        ring.add(*make_rollout(2), 2)
    small, final_obs = make_rollout(3)
    with pytest.raises(ValueError, match="does not fit"):
        ring.add(small[:2], final_obs[:0], 3)


@pytest.mark.parametrize(("capacity", "newest"), [(3, 7), (3, 5), (3, 4), (4, 2), (3, 3)])
def test_a_ring_rebuilt_from_the_last_rollouts_samples_like_the_uninterrupted_one(capacity, newest):
    whole = filled_ring(capacity, range(1, newest + 1))
    rebuilt = filled_ring(capacity, range(max(1, newest - capacity + 1), newest + 1))
    assert rebuilt.filled == whole.filled and rebuilt.transitions == whole.transitions
    for seed in (0, 1):
        a = whole.sample(512, torch.Generator().manual_seed(seed))
        b = rebuilt.sample(512, torch.Generator().manual_seed(seed))
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), key
    # and both keep going alike
    for ring in (whole, rebuilt):
        ring.add(*make_rollout(newest + 1), newest + 1)
    c = whole.sample(256, torch.Generator().manual_seed(2))
    d = rebuilt.sample(256, torch.Generator().manual_seed(2))
    assert all(torch.equal(c[key], d[key]) for key in c)


def test_a_ring_sampled_before_its_rebuild_is_complete_refuses():
    ring = filled_ring(3, range(6, 7))  # a rebuild of 7 given only its newest rollout
    with pytest.raises(RuntimeError, match="replay ring"):
        ring.sample(8, torch.Generator().manual_seed(0))

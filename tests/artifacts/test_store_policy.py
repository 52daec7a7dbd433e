"""Store policies: what each keeps (attrs, shapes, dtypes), the budget's arithmetic, the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _rollouts import N, T, make_rollout

from rlpipe.artifacts.store import RolloutStore
from rlpipe.artifacts.store_policy import (
    StorePolicy,
    bytes_per_env_step,
    derive_policy,
    fidelity_refusal,
    layout_of,
    stored_bytes,
)
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import ConfigError, StoreCfg

# make_rollout's leaves per [env, time] slot: obs 4×f32 (16 B), action i64 (8), sample_log_prob,
# value, reward, final_value f32 (4 each), terminated/truncated/done bool (1 each), recurrent/h 3×f32 (12)
SLOT_BYTES = 16 + 8 + 4 * 4 + 3 + 12


def written(tmp_path: Path, policy: StorePolicy, iterations: range, writer: str = "thread") -> RolloutStore:
    store = RolloutStore(tmp_path, StoreCfg(writer=writer), policy)
    with store:
        for it in iterations:
            store.submit(make_rollout(seed=it), {"iteration": it})
    return store


def test_the_byte_arithmetic_counts_every_leaf_of_every_slot() -> None:
    layout = layout_of(make_rollout())
    assert stored_bytes(layout) == N * (T + 1) * SLOT_BYTES
    assert bytes_per_env_step(layout) == pytest.approx(SLOT_BYTES * (T + 1) / T)


def test_the_default_policy_stores_everything_and_says_complete_and_exact(tmp_path: Path) -> None:
    written(tmp_path, StorePolicy(), range(1, 3))
    rollout, attrs = read_rollout(tmp_path / "iter-000002.zarr")
    assert torch.equal(rollout["obs"], make_rollout(seed=2)["obs"])
    assert {k: attrs[k] for k in ("complete", "exact", "stored_envs", "num_envs", "every", "precision")} == {
        "complete": True,
        "exact": True,
        "stored_envs": N,
        "num_envs": N,
        "every": 1,
        "precision": {},
    }


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_every_k_stores_the_multiples_of_k_and_submit_returns_at_once(tmp_path: Path, writer: str) -> None:
    store = written(tmp_path, StorePolicy(every=3), range(1, 8), writer)
    assert store.iterations() == [3, 6]
    assert read_rollout(tmp_path / "iter-000006.zarr")[1]["every"] == 3


def test_an_env_subset_keeps_the_first_m_envs_bit_for_bit(tmp_path: Path) -> None:
    written(tmp_path, StorePolicy(envs=2), range(1, 2))
    rollout, attrs = read_rollout(tmp_path / "iter-000001.zarr")
    full = make_rollout(seed=1)
    assert rollout.batch_size == torch.Size([2, T + 1])
    assert all(torch.equal(rollout[k], full[k][:2]) for k in full.keys(True, True))
    assert (attrs["complete"], attrs["exact"], attrs["stored_envs"], attrs["num_envs"]) == (False, True, 2, N)


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_lower_precision_group_is_stored_as_float16_and_read_back_as_float32(
    tmp_path: Path, writer: str
) -> None:
    written(tmp_path, StorePolicy(precision={"obs": "float16"}), range(1, 2), writer)
    assert '"data_type": "float16"' in (tmp_path / "iter-000001.zarr" / "obs" / "zarr.json").read_text()
    assert '"data_type": "float32"' in (tmp_path / "iter-000001.zarr" / "value" / "zarr.json").read_text()
    rollout, attrs = read_rollout(tmp_path / "iter-000001.zarr")
    full = make_rollout(seed=1)
    assert rollout["obs"].dtype == torch.float32
    assert torch.equal(rollout["obs"], full["obs"].half().float())
    assert torch.equal(rollout["value"], full["value"])  # other groups untouched
    assert (attrs["complete"], attrs["exact"], attrs["precision"]) == (True, False, {"obs": "float16"})


def test_a_dict_observation_group_is_narrowed_alone() -> None:
    rollout = make_rollout()
    obs = rollout["obs"]
    rollout = rollout.exclude("obs")
    rollout.set(("obs", "policy"), obs.clone())
    rollout.set(("obs", "critic"), obs.clone())
    kept, attrs = StorePolicy(precision={"obs/critic": "float16"}).shape(rollout)
    assert kept["obs", "critic"].dtype == torch.float16 and kept["obs", "policy"].dtype == torch.float32
    assert attrs["precision"] == {"obs/critic": "float16"}


def test_a_precision_group_the_rollout_lacks_is_an_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^store\.precision\.obs/camera: the rollout has no such"):
        derive_policy(StoreCfg(precision={"obs/camera": "float16"}), layout_of(make_rollout()), 10)


def test_a_total_budget_keeps_the_most_iterations_that_fit() -> None:
    layout = layout_of(make_rollout())
    per_iteration = stored_bytes(layout)
    cfg = StoreCfg.model_validate({"budget": {"total_tb": 4 * per_iteration / 1e12}})
    policy = derive_policy(cfg, layout, iterations=10)
    # 4 iterations fit; every k stores 10 // k of 10: k = 2 → 5 (too many), k = 3 → 3 ≤ 4
    assert policy.every == 3 and policy.budget == f"total_tb {4 * per_iteration / 1e12:g}"
    assert derive_policy(cfg, layout, iterations=4).every == 1  # the whole run fits
    two_ranks = derive_policy(cfg, layout, iterations=10, world_size=2)  # 2 fit: k = 4 → 2
    assert two_ranks.every == 4


def test_a_total_budget_counts_the_bytes_after_the_subset_and_precision() -> None:
    layout = layout_of(make_rollout())
    budget = {"total_tb": 4 * stored_bytes(layout) / 1e12}
    halved = derive_policy(StoreCfg.model_validate({"budget": budget, "envs": N // 2}), layout, iterations=10)
    assert halved.every == 2 and halved.envs == N // 2  # 8 half iterations fit: k = 2 → 5


def test_a_total_budget_below_one_iteration_is_an_error_naming_the_key() -> None:
    cfg = StoreCfg.model_validate({"budget": {"total_tb": 1e-12}})
    with pytest.raises(ConfigError, match=r"^store\.budget\.total_tb: 1e-12 TB is less than one stored"):
        derive_policy(cfg, layout_of(make_rollout()), iterations=10)


def test_a_rate_budget_keeps_every_kth_iteration_within_the_rate() -> None:
    layout = layout_of(make_rollout())
    per_step = bytes_per_env_step(layout)
    cfg = StoreCfg.model_validate(
        {"budget": {"rate_gb_s": per_step * 1e6 / 2.5 / 1e9, "env_steps_per_s": 1e6}}
    )
    assert derive_policy(cfg, layout, iterations=10).every == 3  # 1/2.5 of the bytes: k = ceil(2.5)


def test_every_beyond_the_runs_iterations_is_an_error_naming_the_key() -> None:
    layout = layout_of(make_rollout())
    assert derive_policy(StoreCfg(every=10), layout, iterations=10).every == 10  # stores iteration 10
    for every in (11, 10**12):
        with pytest.raises(
            ConfigError,
            match=rf"^store\.every: {every} is more than trainer\.iterations \(10\), so no iteration "
            r"would be stored; accepted: 1 to 10 \(store\.enabled: false stores none\)$",
        ):
            derive_policy(StoreCfg(every=every), layout, iterations=10)


def test_a_rate_budget_below_one_iteration_is_an_error_naming_the_key_and_the_least_rate() -> None:
    layout = layout_of(make_rollout())
    per_step = bytes_per_env_step(layout)
    # a rate allowing per_step / 11 B per env step keeps every 11th iteration: none of 10
    low = StoreCfg.model_validate(
        {"budget": {"rate_gb_s": per_step * 1e6 / 11 / 1e9, "env_steps_per_s": 1e6}}
    )
    with pytest.raises(ConfigError) as info:
        derive_policy(low, layout, iterations=10)
    message = str(info.value)
    assert message.startswith("store.budget.rate_gb_s: rate_gb_s ") and "\n" not in message
    assert "every 11th iteration, so none of the run's 10 would be stored" in message
    least = float(message.split("raise it to at least ")[1].split(",")[0])
    assert per_step * 1e6 / 10 / 1e9 <= least <= per_step * 1e6 / 10 / 1e9 * 1.01  # rounded up
    enough = StoreCfg.model_validate({"budget": {"rate_gb_s": least, "env_steps_per_s": 1e6}})
    assert derive_policy(enough, layout, iterations=10).every == 10


def test_the_smallest_rate_budget_derives_a_finite_every() -> None:
    """The least bytes per env step StoreBudgetCfg accepts: a quotient that fits, refused as none stored."""
    cfg = StoreCfg.model_validate({"budget": {"rate_gb_s": 1e-9, "env_steps_per_s": 1e6}})
    with pytest.raises(ConfigError, match=r"^store\.budget\.rate_gb_s: .* allows 1e-06 B per env step"):
        derive_policy(cfg, layout_of(make_rollout()), iterations=10**6)
    assert derive_policy(cfg, layout_of(make_rollout()), iterations=10**9).every <= 10**9


def test_stores_without_fidelity_attributes_are_complete_and_exact() -> None:
    assert fidelity_refusal(Path("old.zarr"), {"iteration": 3}, "replay") is None


def test_the_refusals_name_the_store_and_what_it_lacks() -> None:
    subset = fidelity_refusal(
        Path("iter-000002.zarr"),
        {"complete": False, "stored_envs": 3, "num_envs": 8},
        "replay (the online update)",
    )
    assert subset == (
        "iter-000002.zarr: holds the first 3 of 8 envs (store.envs), not the whole "
        "iteration; replay (the online update) needs every env, so it is refused"
    )
    lossy = fidelity_refusal(
        Path("iter-000002.zarr"),
        {"exact": False, "precision": {"obs": "float16"}},
        "rlpipe update (the online update)",
    )
    assert lossy is not None and lossy.startswith("iter-000002.zarr: stores obs as float16 (store.precision)")


def test_a_store_written_without_fidelity_attributes_is_read_as_complete_and_exact(tmp_path: Path) -> None:
    from rlpipe.artifacts.store import write_rollout
    from rlpipe.offline.rebuild import load_rollout

    write_rollout(tmp_path / "iter-000001.zarr", make_rollout(), {"iteration": 1})  # as before the policies
    rollout, attrs = load_rollout(tmp_path / "iter-000001.zarr", purpose="replay (the online update)")
    assert "complete" not in attrs and torch.equal(rollout["obs"], make_rollout()["obs"])

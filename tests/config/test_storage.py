"""``store.every/envs/precision/budget``: strict validation, each error one line naming the key."""

from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, load


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("store.every=0", r"^params.yaml: store\.every: Input should be greater than or equal to 1 \(got 0\)$"),
        ("store.envs=0", r"^params.yaml: store\.envs: Input should be greater than or equal to 1"),
        ("store.envs=100000", r"^params.yaml: store\.envs: got 100000; at most trainer\.num_envs \(\d+\), the envs of each rank$"),
        ("store.precision={action: float16}", r"^params.yaml: store\.precision\.action: 'action' is not an observation group; "
                                              r"accepted: obs \(every observation array\) or obs/<key>"),
        ("store.precision={obs: bfloat16}", r"^params.yaml: store\.precision\.obs: Input should be 'float16'"),
        ("store.budget={}", r"^params.yaml: store\.budget: give one of total_tb .* or rate_gb_s"),
        ("store.budget={total_tb: 1, rate_gb_s: 1, env_steps_per_s: 1}", r"^params.yaml: store\.budget: give one of"),
        ("store.budget={rate_gb_s: 1.5}", r"^params.yaml: store\.budget: rate_gb_s and env_steps_per_s go together"),
        ("store.budget={total_tb: -1}", r"^params.yaml: store\.budget\.total_tb: Input should be greater than 0"),
        ("store.budget={total_tb: .inf}", r"^params.yaml: store\.budget\.total_tb: Input should be a finite number"),
        ("store.budget={total_tb: 2, tb: 1}", r"^params.yaml: store\.budget\.tb: unknown key; accepted: total_tb, rate_gb_s"),
        ("store.budget={total_tb: '2'}", r"^params.yaml: store\.budget\.total_tb: "),
    ],
)
def test_bad_store_policies_name_the_key(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        load("params.yaml", [override])
    assert "\n" not in str(info.value)


def test_a_budget_replaces_every():
    with pytest.raises(ConfigError, match=r"^params.yaml: store\.every: store\.budget derives every; set one of"):
        load("params.yaml", ["store.every=2", "store.budget={total_tb: 2}"])


def test_good_policies_load():
    cfg = load("params.yaml", ["store.envs=4", "store.precision={obs/policy: float16}",
                               "store.budget={rate_gb_s: 1.5, env_steps_per_s: 2.0e6}"])
    assert cfg.store.budget.bytes_per_env_step() == pytest.approx(750.0)
    assert cfg.store.budget.words() == "rate_gb_s 1.5 at 2000000 env steps/s"

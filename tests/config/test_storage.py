"""``store.every/envs/precision/budget/action_mean``: strict validation, one line naming the key."""

from __future__ import annotations

import re

import pytest

from rlpipe.config import ConfigError, load


@pytest.mark.parametrize(
    ("override", "key", "message"),
    [
        ("store.every=0", "store.every", r"Input should be greater than or equal to 1 \(got 0\)$"),
        ("store.envs=0", "store.envs", r"Input should be greater than or equal to 1"),
        (
            "store.envs=100000",
            "store.envs",
            r"got 100000; at most trainer\.num_envs \(\d+\), the envs of each rank$",
        ),
        (
            "store.precision={action: float16}",
            "store.precision.action",
            r"'action' is not an observation group; accepted: obs \(every observation array\) or obs/<key>",
        ),
        ("store.precision={obs: bfloat16}", "store.precision.obs", r"Input should be 'float16'"),
        ("store.budget={}", "store.budget", r"give one of total_tb .* or rate_gb_s"),
        ("store.budget={total_tb: 1, rate_gb_s: 1, env_steps_per_s: 1}", "store.budget", r"give one of"),
        ("store.budget={rate_gb_s: 1.5}", "store.budget", r"rate_gb_s and env_steps_per_s go together"),
        ("store.budget={total_tb: -1}", "store.budget.total_tb", r"Input should be greater than 0"),
        ("store.budget={total_tb: .inf}", "store.budget.total_tb", r"Input should be a finite number"),
        (
            "store.budget={total_tb: 2, tb: 1}",
            "store.budget.tb",
            r"unknown key; accepted: total_tb, rate_gb_s",
        ),
        ("store.budget={total_tb: '2'}", "store.budget.total_tb", r""),
        (
            "store.budget={rate_gb_s: 1.0e-310, env_steps_per_s: 1.0e10}",
            "store.budget",
            r"rate_gb_s 1e-310 at env_steps_per_s 1e\+10 allows 1e-311 bytes per env step; accepted: "
            r"rate_gb_s · 10⁹ / env_steps_per_s from 1e-06 to 1e\+15 bytes per env step$",
        ),
        (
            "store.budget={rate_gb_s: 5.0e-324, env_steps_per_s: 1.0e12}",
            "store.budget",
            r"rate_gb_s 4\.94066e-324 at env_steps_per_s 1e\+12 allows 0 bytes per env step; accepted",
        ),
        (
            "store.budget={rate_gb_s: 1.0e9, env_steps_per_s: 1.0e-300}",
            "store.budget",
            r"rate_gb_s 1e\+09 at env_steps_per_s 1e-300 allows inf bytes per env step; accepted",
        ),
        (
            "store.budget={rate_gb_s: 1.0e-300, env_steps_per_s: 1.0e300}",
            "store.budget.env_steps_per_s",
            r"Input should be less than or equal to 1000000000000 \(got 1e\+300\)$",
        ),
        (
            "store.budget={rate_gb_s: 1.0e308, env_steps_per_s: 1}",
            "store.budget.rate_gb_s",
            r"Input should be less than or equal to 1000000000 \(got 1e\+308\)$",
        ),
        (
            "store.budget={total_tb: 1.0e308}",
            "store.budget.total_tb",
            r"Input should be less than or equal to 1000000000 \(got 1e\+308\)$",
        ),
        ("store.action_mean='true'", "store.action_mean", r"Input should be true or false"),
        ("store.action_mean=1", "store.action_mean", r"Input should be true or false"),
    ],
)
def test_bad_store_policies_name_the_key(override, key, message):
    with pytest.raises(ConfigError, match=rf"^params\.yaml: {re.escape(key)}: {message}") as info:
        load("params.yaml", [override])
    assert "\n" not in str(info.value)


def test_a_budget_replaces_every():
    with pytest.raises(ConfigError, match=r"^params\.yaml: store\.every: store\.budget derives every"):
        load("params.yaml", ["store.every=2", "store.budget={total_tb: 2}"])


def test_good_policies_load():
    cfg = load(
        "params.yaml",
        [
            "store.envs=4",
            "store.precision={obs/policy: float16}",
            "store.budget={rate_gb_s: 1.5, env_steps_per_s: 2.0e6}",
        ],
    )
    assert cfg.store.budget.bytes_per_env_step() == pytest.approx(750.0)
    assert cfg.store.budget.words() == "rate_gb_s 1.5 at 2000000 env steps/s"


def test_the_budgets_at_the_ends_of_their_ranges_load():
    """The bounds are inclusive: the derived bytes stay finite and positive at every corner."""
    for budget, allowed in [
        ("{rate_gb_s: 1.0e-9, env_steps_per_s: 1.0e6}", 1e-6),
        ("{rate_gb_s: 1.0e6, env_steps_per_s: 1}", 1e15),
        ("{rate_gb_s: 1.0e9, env_steps_per_s: 1.0e12}", 1e6),
    ]:
        cfg = load("params.yaml", [f"store.budget={budget}"])
        assert cfg.store.budget.bytes_per_env_step() == pytest.approx(allowed)
    assert load("params.yaml", ["store.budget={total_tb: 1.0e9}"]).store.budget.total_bytes() == 1e21


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", r"Input should be greater than 0"),
        ("-1", r"Input should be greater than 0"),
        (".inf", r"Input should be a finite number"),
        ("'600'", r""),
        ("true", r""),
    ],
)
def test_a_writer_timeout_is_a_positive_finite_number_of_seconds(value, message):
    with pytest.raises(ConfigError, match=rf"^params\.yaml: store\.writer_timeout_s: {message}") as info:
        load("params.yaml", [f"store.writer_timeout_s={value}"])
    assert "\n" not in str(info.value)
    assert load("params.yaml", ["store.writer_timeout_s=2.5"]).store.writer_timeout_s == 2.5

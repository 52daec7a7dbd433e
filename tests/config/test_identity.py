"""Experiment names and seeds: refused at load with the rule stated (length limit, seed range)."""

from __future__ import annotations

import pytest

from rlpipe.config import ConfigError, check_exp_name, load


def test_a_too_long_exp_name_states_the_limit():
    with pytest.raises(ConfigError) as info:
        load("params.yaml", [f"trainer.exp_name={'a' * 250}"])
    message = str(info.value)
    assert message.startswith("params.yaml: trainer.exp_name: got a name of 250 characters ('aaaa")
    assert message.endswith("…); at most 200 are accepted (a plain folder name)")
    assert load("params.yaml", [f"trainer.exp_name={'a' * 200}"]).trainer.exp_name == "a" * 200


def test_a_derived_name_is_checked_with_the_same_rule():
    """A student's ``<teacher>-student`` may pass the limit though the teacher's name did not."""
    assert check_exp_name("teacher-student") == "teacher-student"
    with pytest.raises(ConfigError, match=r"^distill: got a name of 205 characters .* at most 200 "):
        check_exp_name(f"{'t' * 197}-student", key="distill")
    with pytest.raises(ConfigError, match=r"^trainer.exp_name: got '../x'; a plain folder name of at most"):
        check_exp_name("../x")


@pytest.mark.parametrize("key", ["trainer.seed", "eval.seed"])
@pytest.mark.parametrize("value", [2**64, 2**31, -1])
def test_an_out_of_range_seed_names_the_accepted_range(key, value):
    with pytest.raises(ConfigError) as info:
        load("params.yaml", [f"{key}={value}"])
    assert str(info.value) == (
        f"params.yaml: {key}: got {value}; accepted: an integer from 0 to 2147483647 (2**31 - 1)"
    )


def test_a_seed_of_many_digits_is_shortened():
    with pytest.raises(ConfigError, match=r"trainer.seed: got 1000000000000000000+… \(101 digits\); "):
        load("params.yaml", [f"trainer.seed={10**100}"])


def test_seeds_at_the_ends_of_the_range_load():
    assert load("params.yaml", ["trainer.seed=0"]).trainer.seed == 0
    assert load("params.yaml", [f"eval.seed={2**31 - 1}"]).eval.seed == 2**31 - 1

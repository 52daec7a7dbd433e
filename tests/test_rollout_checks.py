import pytest
import torch

from rlpipe.rollout import allocate_rollout
from rlpipe.rollout_checks import RolloutError, validate


def make(n=3, t=4):
    return allocate_rollout(n, t, (2,), (), torch.int64, "cpu")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda ro: ro.__setitem__("reward", torch.zeros(3, 5, dtype=torch.float64)),
            "key 'reward' has dtype float64, expected float32",
        ),
        (
            lambda ro: ro["reward"].__setitem__((1, 4), 1.0),
            r"key 'reward' padding slot is not zero at \[1, 4\]",
        ),
        (lambda ro: ro["obs"].__setitem__((2, 3, 1), float("nan")), r"key 'obs' is not finite at \[2, 3\]"),
        (lambda ro: ro["value"].__setitem__((0, 1), float("inf")), r"key 'value' is not finite at \[0, 1\]"),
        (
            lambda ro: ro["terminated"].__setitem__((1, 2), True),
            r"key 'done' != terminated \| truncated at \[1, 2\]",
        ),
        (lambda ro: ro.del_("final_value"), "lacks schema key 'final_value'"),
    ],
)
def test_validate_names_key_and_first_bad_index(mutate, message):
    ro = make()
    mutate(ro)
    with pytest.raises(RolloutError, match=message):
        validate(ro, iteration=7)
    with pytest.raises(RolloutError, match=r"iteration 7"):
        validate(ro, iteration=7)


def test_validate_rejects_wrong_batch_shape():
    with pytest.raises(RolloutError, match=r"batch_size must be \[N, T\+1\]"):
        validate(make()[:, :1])

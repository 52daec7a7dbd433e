"""Random-shift augmentation of minibatch images: per-sample crops of an edge-padded image, seeded."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from rlpipe.algorithms.augmentation import SHIFT_PAD, random_shift, shift_images


def test_each_image_is_its_own_shift_of_the_edge_padded_original():
    images = torch.randint(0, 256, (6, 2, 12, 10), dtype=torch.uint8)
    gen = torch.Generator().manual_seed(5)
    shifted = random_shift(images, gen)
    offsets = torch.randint(-SHIFT_PAD, SHIFT_PAD + 1, (6, 2), generator=torch.Generator().manual_seed(5))
    padded = torch.nn.functional.pad(images.float(), (SHIFT_PAD,) * 4, mode="replicate").to(torch.uint8)
    for i, (dy, dx) in enumerate(offsets.tolist()):  # the crop of the padded image at (pad+dy, pad+dx)
        y, x = SHIFT_PAD + dy, SHIFT_PAD + dx
        assert torch.equal(shifted[i], padded[i, :, y : y + 12, x : x + 10])
    assert shifted.dtype == torch.uint8 and len(set(map(tuple, offsets.tolist()))) > 1


def test_same_generator_state_same_shifts_and_leading_dims_are_kept():
    images = torch.randint(0, 256, (3, 4, 1, 8, 8), dtype=torch.uint8)
    a = random_shift(images, torch.Generator().manual_seed(1))
    b = random_shift(images, torch.Generator().manual_seed(1))
    assert a.shape == images.shape and torch.equal(a, b)
    assert not torch.equal(a, random_shift(images, torch.Generator().manual_seed(2)))


def test_only_image_groups_are_shifted_and_the_input_is_left_alone():
    obs = TensorDict(
        {"pixels": torch.randint(0, 256, (5, 1, 8, 8), dtype=torch.uint8), "state": torch.randn(5, 3)},
        batch_size=[5],
    )
    before = obs.clone()
    mb = TensorDict({"obs": obs[:], "action": torch.zeros(5)}, batch_size=[5])
    out = shift_images(mb, torch.Generator().manual_seed(0))
    assert torch.equal(out["obs", "state"], before["state"])
    assert not torch.equal(out["obs", "pixels"], before["pixels"])
    assert torch.equal(obs["pixels"], before["pixels"])  # replaced in the minibatch, not written in place

"""The batched rasterizer: shapes land on the pixels worked out by hand, per canvas."""

from __future__ import annotations

import numpy as np
import torch

from rlpipe.envs.tasks.raster import Painter

RED, BLUE = (255, 0, 0), (0, 0, 255)


def pixels(frame: np.ndarray, color: tuple[int, int, int]) -> set[tuple[int, int]]:
    """``{(row, col)}`` of the pixels of ``frame`` ``[H, W, 3]`` painted ``color``."""
    rows, cols = np.nonzero((frame == np.array(color, dtype=np.uint8)).all(-1))
    return set(zip(rows.tolist(), cols.tolist()))


def test_box_covers_the_pixels_whose_centres_are_inside_on_each_canvas_separately():
    painter = Painter(2, 8, 10, "cpu")
    # canvas 0: x in [1, 4], y in [2, 3] → pixel centres 1.5, 2.5, 3.5 (cols 1-3) and 2.5 (row 2)
    painter.box(torch.tensor([[1.0, 2.0], [6.0, 0.0]]), torch.tensor([[4.0, 3.0], [9.0, 1.0]]), RED)
    frames = painter.frames
    assert frames.shape == (2, 8, 10, 3) and frames.dtype == np.uint8
    assert pixels(frames[0], RED) == {(2, 1), (2, 2), (2, 3)}
    assert pixels(frames[1], RED) == {(0, 6), (0, 7), (0, 8)}
    assert (frames[0][0, 0] == 255).all()  # white background


def test_capsule_is_the_set_of_pixels_within_radius_of_the_segment():
    painter = Painter(1, 12, 12, "cpu")
    p0, p1, radius = torch.tensor([[2.0, 2.0]]), torch.tensor([[9.0, 6.0]]), 1.5
    painter.capsule(p0, p1, radius, BLUE)
    expected = set()
    for r in range(12):
        for c in range(12):  # distance of the pixel centre to the segment, by the textbook formula
            p, a, b = np.array([c + 0.5, r + 0.5]), p0[0].numpy(), p1[0].numpy()
            t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1)
            if np.linalg.norm(p - (a + t * (b - a))) <= radius:
                expected.add((r, c))
    assert pixels(painter.frames[0], BLUE) == expected


def test_later_shapes_paint_over_earlier_ones_and_off_canvas_shapes_are_clipped():
    painter = Painter(1, 6, 6, "cpu")
    painter.box(torch.tensor([[0.0, 0.0]]), torch.tensor([[6.0, 6.0]]), RED)
    painter.disc(torch.tensor([[3.0, 3.0]]), 1.0, BLUE)
    painter.disc(torch.tensor([[-50.0, 80.0]]), 2.0, BLUE)  # entirely outside: nothing, no error
    frame = painter.frames[0]
    assert pixels(frame, BLUE) == {(2, 2), (2, 3), (3, 2), (3, 3)}
    assert len(pixels(frame, RED)) == 36 - 4


def test_hline_spans_every_column_of_every_canvas():
    painter = Painter(3, 5, 7, "cpu")
    painter.hline(2.5, 1.0, RED)
    for frame in painter.frames:
        assert pixels(frame, RED) == {(2, c) for c in range(7)}

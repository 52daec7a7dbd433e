"""A tiny batched rasterizer: filled capsules, discs and boxes on k RGB canvases, in torch, no GL.

Torch envs draw themselves with it (``CartPole.render``, ``Pendulum.render``); pixel observations
(``PixelCartPole``) use the anti-aliased coverage functions at the end. Every shape is a
mask over the whole ``[k, H, W]`` pixel grid computed at once (no Python loop over envs or
pixels), so drawing costs a few tensor ops per shape on the env's own device.

Coordinates are pixels: x to the right, y downwards, ``(0.5, 0.5)`` the centre of the top-left
pixel. Shapes are painted in call order (later ones on top).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["Painter", "box_coverage", "capsule_coverage"]

Color = tuple[int, int, int]


class Painter:
    """``k`` canvases of ``height`` × ``width`` pixels; paint shapes, then read :attr:`frames`.

    Painting writes a palette index per pixel (``[k, H, W]`` uint8 on the device, in place); the
    RGB frames are looked up once, on the host, when read.
    """

    def __init__(
        self, k: int, height: int, width: int, device: torch.device | str, background: Color = (255, 255, 255)
    ) -> None:
        self.device = torch.device(device)
        self.labels = torch.zeros(k, height, width, dtype=torch.uint8, device=self.device)
        self.palette: list[Color] = [background]
        self.ys = (torch.arange(height, device=self.device, dtype=torch.float32) + 0.5).view(1, -1, 1)
        self.xs = (torch.arange(width, device=self.device, dtype=torch.float32) + 0.5).view(1, 1, -1)

    @property
    def frames(self) -> np.ndarray:
        """``[k, H, W, 3]`` uint8 RGB on the host (the palette lookup runs there: frames go to a file)."""
        return np.take(np.asarray(self.palette, dtype=np.uint8), self.labels.cpu().numpy(), axis=0)

    def paint(self, mask: torch.Tensor, color: Color) -> None:
        """Set the pixels where ``mask`` ``[k, H, W]`` (or broadcastable) holds to ``color``."""
        if color not in self.palette:
            if len(self.palette) == 256:
                raise ValueError("a Painter holds at most 256 colours")
            self.palette.append(color)
        self.labels.masked_fill_(mask, self.palette.index(color))

    def _window(self, lo: torch.Tensor, hi: torch.Tensor) -> tuple[slice, slice]:
        """Row and column slices covering the pixel box ``lo``–``hi`` ``[k, 2]`` of every canvas.

        Shapes are evaluated on this window only (one small host read per shape; ``render`` is
        never on a hot path): a shape covers a small part of the canvas, so this is cheaper than
        evaluating it on every pixel.
        """
        bounds = torch.cat((lo.min(0).values, hi.max(0).values)).floor().tolist()
        height, width = self.labels.shape[1:]
        x0, y0 = min(max(int(bounds[0]), 0), width), min(max(int(bounds[1]), 0), height)
        x1, y1 = min(max(int(bounds[2]) + 2, 0), width), min(max(int(bounds[3]) + 2, 0), height)
        return slice(y0, y1), slice(x0, x1)

    def _paint_window(self, rows: slice, cols: slice, mask: torch.Tensor, color: Color) -> None:
        if color not in self.palette:
            self.paint(torch.zeros((), dtype=torch.bool, device=self.device), color)  # registers it
        self.labels[:, rows, cols].masked_fill_(mask, self.palette.index(color))

    def capsule(self, p0: torch.Tensor, p1: torch.Tensor, radius: float, color: Color) -> None:
        """A segment ``p0``–``p1`` (each ``[k, 2]`` pixel x, y) with round ends, ``radius`` px thick."""
        p0, p1 = p0.float(), p1.float()
        rows, cols = self._window(torch.minimum(p0, p1) - radius, torch.maximum(p0, p1) + radius)
        xs, ys = self.xs[:, :, cols], self.ys[:, rows]
        x0, y0 = p0[:, 0].view(-1, 1, 1), p0[:, 1].view(-1, 1, 1)
        ux, uy = p1[:, 0].view(-1, 1, 1) - x0, p1[:, 1].view(-1, 1, 1) - y0
        dx, dy = xs - x0, ys - y0  # [k, 1, w], [k, h, 1]
        t = ((dx * ux + dy * uy) / (ux * ux + uy * uy).clamp_min(1e-12)).clamp_(0.0, 1.0)
        dist2 = (dx - t * ux).square_() + (dy - t * uy).square_()
        self._paint_window(rows, cols, dist2 <= radius * radius, color)

    def disc(self, center: torch.Tensor, radius: float, color: Color) -> None:
        """A filled circle around ``center`` ``[k, 2]``."""
        center = center.float()
        rows, cols = self._window(center - radius, center + radius)
        x0, y0 = center[:, 0].view(-1, 1, 1), center[:, 1].view(-1, 1, 1)
        inside = (self.xs[:, :, cols] - x0).square() + (self.ys[:, rows] - y0).square() <= radius * radius
        self._paint_window(rows, cols, inside, color)

    def box(self, lo: torch.Tensor, hi: torch.Tensor, color: Color) -> None:
        """An axis-aligned filled box from corner ``lo`` to corner ``hi`` (each ``[k, 2]`` pixel x, y)."""
        rows, cols = self._window(lo, hi)
        xs, ys = self.xs[:, :, cols], self.ys[:, rows]
        x0, y0 = lo[:, 0].view(-1, 1, 1), lo[:, 1].view(-1, 1, 1)
        x1, y1 = hi[:, 0].view(-1, 1, 1), hi[:, 1].view(-1, 1, 1)
        self._paint_window(rows, cols, ((xs >= x0) & (xs <= x1)) & ((ys >= y0) & (ys <= y1)), color)

    def hline(self, y: float, thickness: float, color: Color) -> None:
        """A full-width horizontal line at pixel row ``y`` (the same on every canvas)."""
        self.paint((self.ys - y).abs() <= thickness / 2, color)


def capsule_coverage(
    xs: torch.Tensor, ys: torch.Tensor, p0: torch.Tensor, p1: torch.Tensor, radius: float
) -> torch.Tensor:
    """``[k, H, W]`` float in [0, 1]: how much of each pixel a segment ``p0``–``p1`` ``[k, 2]`` covers.

    ``xs`` ``[1, 1, W]`` and ``ys`` ``[1, H, 1]`` are the pixel centres. The edge is a one-pixel ramp
    (coverage ``radius + 0.5 − distance``), so a sub-pixel move changes the image: frames of a
    slowly moving shape still differ, which is what makes velocity visible to a small CNN. The
    whole grid is evaluated (no host read), so it runs inside a batched env step on any device.
    """
    x0, y0 = p0[:, 0].view(-1, 1, 1), p0[:, 1].view(-1, 1, 1)
    ux, uy = p1[:, 0].view(-1, 1, 1) - x0, p1[:, 1].view(-1, 1, 1) - y0
    dx, dy = xs - x0, ys - y0
    t = ((dx * ux + dy * uy) / (ux * ux + uy * uy).clamp_min(1e-12)).clamp_(0.0, 1.0)
    dist = ((dx - t * ux).square_() + (dy - t * uy).square_()).sqrt_()
    return (radius + 0.5 - dist).clamp_(0.0, 1.0)


def box_coverage(
    xs: torch.Tensor, ys: torch.Tensor, center: torch.Tensor, half: tuple[float, float]
) -> torch.Tensor:
    """``[k, H, W]`` float in [0, 1]: coverage of an axis-aligned box ``center`` ``[k, 2]`` ± ``half`` px.

    Edges ramp over one pixel as in :func:`capsule_coverage`.
    """
    cx, cy = center[:, 0].view(-1, 1, 1), center[:, 1].view(-1, 1, 1)
    inside_x = (half[0] + 0.5 - (xs - cx).abs()).clamp_(0.0, 1.0)
    inside_y = (half[1] + 0.5 - (ys - cy).abs()).clamp_(0.0, 1.0)
    return inside_x * inside_y

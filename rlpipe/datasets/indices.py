"""A set of env indices kept as inclusive spans, so ``--envs 0:100000000000`` costs two numbers.

``--envs`` names env indices and ranges (``0,2,5:7``). The set is never expanded: it is checked
against the run's env count by its largest index, printed in the spans the user gave (merged), and
iterated lazily only once it is known to lie inside the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["ENVS_FORMAT", "EnvIndices"]

ENVS_FORMAT = "env indices and ranges A:B (both included, 0 <= A <= B), comma-separated, e.g. 0,2,5:7"
"""What ``--envs`` accepts."""


@dataclass(frozen=True)
class EnvIndices:
    """Env indices (per rank) as sorted, disjoint, non-adjacent inclusive spans ``((A, B), …)``."""

    spans: tuple[tuple[int, int], ...]
    """Inclusive ``(A, B)`` with ``0 <= A <= B``, ascending, each starting past the last one's ``B + 1``."""

    def __post_init__(self) -> None:
        if not self.spans:
            raise ValueError(f"no env index given; expected {ENVS_FORMAT}")
        previous = -2
        for low, high in self.spans:
            if not previous + 1 < low <= high:
                raise ValueError(f"spans {self.spans[:3]}…: not sorted, merged spans with 0 <= A <= B")
            previous = high

    @classmethod
    def of_spans(cls, spans: Iterable[tuple[int, int]]) -> EnvIndices:
        """The union of inclusive spans given in any order, overlapping or not (each ``0 <= A <= B``)."""
        merged: list[tuple[int, int]] = []
        for low, high in sorted(spans):
            if not 0 <= low <= high:
                raise ValueError(f"{low}:{high}: expected {ENVS_FORMAT}")
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        return cls(tuple(merged))

    @classmethod
    def of(cls, indices: Iterable[int]) -> EnvIndices:
        """The set of the given indices (each ``>= 0``; repeats merge)."""
        return cls.of_spans((int(k), int(k)) for k in indices)

    @classmethod
    def parse(cls, text: str) -> EnvIndices:
        """``0,2,5:7`` → spans ``((0, 0), (2, 2), (5, 7))``; ``ValueError`` for anything else."""
        spans = []
        for part in text.split(","):
            first, sep, last = part.strip().partition(":")
            try:
                low = int(first)
                spans.append((low, int(last) if sep else low))
            except ValueError:
                raise ValueError(f"expected {ENVS_FORMAT}") from None
        return cls.of_spans(spans)

    @property
    def last(self) -> int:
        """The largest index."""
        return self.spans[-1][1]

    def __iter__(self) -> Iterator[int]:
        """The indices in ascending order, one at a time."""
        for low, high in self.spans:
            yield from range(low, high + 1)

    def __contains__(self, index: object) -> bool:
        """Whether ``index`` is one of the indices (by the spans, nothing expanded)."""
        return isinstance(index, int) and any(low <= index <= high for low, high in self.spans)

    def __str__(self) -> str:
        """As ``--envs`` takes them: ``0,2,5:7``."""
        return ",".join(str(low) if low == high else f"{low}:{high}" for low, high in self.spans)

"""What ``rlpipe replay`` needs, checked before it writes anything (and what ``update`` may advise).

Replay puts the online state after iteration m together from the newest checkpoint j ≤ m of the run
(or the initial weights, j = 0), re-updating the stored rollouts j+1 … m. :func:`rebuild_start`
says whether the stored rollouts allow that; :func:`check_replay` refuses, before the output folder
exists, a replay that needs a rollout that is not stored, one that cannot serve it (rejected, a
subset of the envs, a lower precision), or a rebuild under params other than the rollouts' own.
"""

from __future__ import annotations

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath
from rlpipe.artifacts.layout import RunLayout, rollout_name
from rlpipe.artifacts.shards import read_any_attrs
from rlpipe.config import RunConfig, training_hash
from rlpipe.offline.rebuild import refuse_unusable

__all__ = [
    "PURPOSE",
    "check_replay",
    "missing_words",
    "needs_weights",
    "rebuild_start",
    "refuse_other_params",
]

PURPOSE = "replay (the online update)"
"""What replay reproduces bit for bit: the stores it reads must be complete and exact."""


def rebuild_start(checkpoints: dict[int, AnyPath], stored: dict[int, AnyPath], m: int) -> int | None:
    """The checkpoint j ≤ m (0: the initial weights) the state after ``m`` is rebuilt from.

    ``None`` when one of the rollouts j+1 … m is missing from ``stored``: nothing rebuilds it.
    """
    j = max((c for c in checkpoints if c <= m), default=0)
    return j if all(i in stored for i in range(j + 1, m + 1)) else None


def missing_words(stored: dict[int, AnyPath]) -> str:
    """``missing``, or why: ``not stored (the run stores every 4th iteration, store.every: 4)``."""
    every = int(read_any_attrs(stored[max(stored)]).get("every", 1)) if stored else 1
    if every == 1:
        return "missing"
    return (
        f"not stored (the run stores the iterations that are multiples of {every}, store.every: "
        f"{every}; checkpoint.every_iteration: true lets replay start each stored one from its "
        "checkpoint)"
    )


def needs_weights(k: int, m: int, checkpoints: AnyPath) -> str:
    """Why replaying iteration ``k`` needs the state after ``m`` (no checkpoint ``m`` in ``checkpoints``)."""
    return (
        f"replaying iteration {k} needs the weights after iteration {m}, and there is no "
        f"checkpoint of iteration {m} of this run under {checkpoints}"
    )


def refuse_other_params(path: AnyPath, mine: str, want: str | None, m: int, why: str) -> None:
    """Rebuilding the state after ``m`` (or starting from the initial weights) needs the rollouts' params."""
    if want is None or mine == want:
        return
    need = f"{why}; rebuilding them" if m else "replaying iteration 1 starts from the initial weights, which"
    raise StoreError(
        f"{path}: {need} needs the params the rollouts were collected with, and these differ "
        f"(training hash {mine} ≠ {want}); keep them and put replay changes under replay.algorithm"
    )


def check_replay(
    cfg: RunConfig,
    rollouts: AnyPath,
    stored: dict[int, AnyPath],
    ks: list[int],
    chain: bool,
    start: AnyPath | None,
    allow_rejected: bool,
) -> None:
    """Refuse, naming the store, a replay of ``ks`` that would fail on its rollouts (see the module).

    Non-chain, every k starts from the state after k−1; a chain only its first (none with a
    ``start`` checkpoint). Reads attributes and folder listings only.
    """
    checkpoint_dir = RunLayout.of_rollouts(rollouts).checkpoints
    checkpoints = RunLayout.of_rollouts(rollouts).checkpoint_paths()
    read = set(ks)
    for k in [] if chain and start is not None else ks[:1] if chain else ks:
        m, why = k - 1, needs_weights(k, k - 1, checkpoint_dir)
        j = rebuild_start(checkpoints, stored, m)
        if j is None:
            newest = max((c for c in checkpoints if c <= m), default=0)
            first = next(i for i in range(newest + 1, m + 1) if i not in stored)
            raise StoreError(f"{rollouts / rollout_name(first)}: {missing_words(stored)}; {why}")
        read.update(range(j + 1, m + 1))
        if m not in checkpoints:
            want = read_any_attrs(stored[k]).get("training_hash")
            refuse_other_params(stored[k], training_hash(cfg), want, m, why)
    for i in sorted(read):
        refuse_unusable(stored[i], read_any_attrs(stored[i]), allow_rejected, PURPOSE)

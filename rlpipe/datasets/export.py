"""``rlpipe dataset``'s driver: stored rollouts → episodes → one dataset folder, published whole.

The dataset is written under a hidden temporary sibling of ``out`` and renamed to ``out`` only when
complete, so ``out`` holds a whole dataset or nothing; a failure (bad input found while reading, an
empty selection, a full disk) removes the temporary. A temporary a killed export left is removed
by the next export to the same ``out`` once its process is dead (a live export's is left alone).
Everything a user can get wrong that is known before reading (an existing or unusable ``out``, an
``out`` inside a run directory, options of the other format, an env without a control rate for
LeRobot) is refused before anything is written.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rlpipe.artifacts.atomic import publish_dir, temporary_sibling, unpublishable
from rlpipe.artifacts.fs import AnyPath, is_object, tree_bytes
from rlpipe.artifacts.layout import enclosing_run_dir
from rlpipe.artifacts.removal import clean_temporaries, delete

if TYPE_CHECKING:
    from rlpipe.datasets.episodes import DatasetSource, Episode, Selection, Summary

__all__ = ["FORMATS", "Output", "export_dataset"]

FORMATS = ("lerobot", "minari")
"""What ``--format`` accepts."""


@dataclasses.dataclass(frozen=True)
class Output:
    """Where and how the dataset is written; the format's own options stay ``None`` for the other one."""

    fmt: str
    """``lerobot`` or ``minari``."""
    out: Path
    """The dataset folder; must not exist."""
    images: str | None = None
    """LeRobot: ``video`` (AV1 per camera group, LeRobot's default) or ``png`` (lossless)."""
    task: str | None = None
    """LeRobot: the task text of every episode (default: the env id)."""
    dataset_id: str | None = None
    """Minari: the dataset id (default ``rlpipe/<exp>/rollouts-v0``)."""


def check_output(output: Output) -> None:
    """Refuse an output that cannot be written, before anything is read: one line naming the option."""
    if output.fmt not in FORMATS:
        raise ValueError(f"--format: {output.fmt!r} is not a dataset format; expected {' or '.join(FORMATS)}")
    if is_object(output.out):
        raise ValueError(f"--out: {output.out}: a dataset is written to a local folder; copy it afterwards")
    check_out_folder(Path(output.out))
    other = {
        "lerobot": {"--dataset-id": output.dataset_id},
        "minari": {"--images": output.images, "--task": output.task},
    }[output.fmt]
    for option, value in other.items():
        if value is not None:
            raise ValueError(f"{option}: not an option of --format {output.fmt}")
    if output.fmt == "minari":
        from rlpipe.datasets.minari_export import check_dataset_id
        from rlpipe.extras import MINARI, require_all

        require_all(MINARI, "rlpipe dataset --format minari")
        if output.dataset_id is not None:
            check_dataset_id(output.dataset_id)


def check_out_folder(out: Path) -> None:
    """Refuse an ``--out`` that cannot become a new dataset folder, in one line naming ``--out``.

    Refused: what :func:`~rlpipe.artifacts.atomic.publish_dir` cannot put a new folder at (an
    existing entry, a dangling link, a path under a file), and a path inside a run directory (the
    dataset can go with the run: ``--overwrite`` clears what rlpipe wrote there, ``rlpipe gc`` frees
    whole run dirs).
    """
    problem = unpublishable(out)
    if problem is not None:
        raise ValueError(f"--out: {problem}; give a new folder (a dataset is written once)")
    run_dir = enclosing_run_dir(out)
    if run_dir is not None:
        raise ValueError(
            f"--out: {out} is inside the run directory {run_dir}, where it can go with the run "
            "(--overwrite, rlpipe gc); give a folder outside run directories"
        )


def check_source(source: DatasetSource, output: Output) -> None:
    """Refuse a run the format cannot represent (LeRobot: an integer control rate, its camera frames)."""
    if output.fmt == "lerobot":
        from rlpipe.datasets.lerobot import check_lerobot_source

        check_lerobot_source(source, images=output.images or "video")


def export_dataset(
    run_dir: str | AnyPath,
    selection: Selection,
    output: Output,
    on_episode: Callable[[Episode], None] | None = None,
) -> Summary:
    """Write the episodes ``selection`` picks from ``run_dir`` as ``output``; the summary of what was written.

    Raises ``ValueError`` (one line) for bad input, with nothing written: see :func:`check_output`,
    :func:`~rlpipe.datasets.episodes.open_source`, and a selection that leaves no episode.
    """
    from rlpipe.datasets.episodes import Summary, open_source, read_episodes

    check_output(output)
    source = open_source(run_dir, selection)
    check_source(source, output)
    summary = Summary()
    out = Path(output.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_temporaries(out.parent, re.compile(rf"{re.escape(out.name)}\Z"))  # of killed exports to out
    tmp = temporary_sibling(out)
    tmp.mkdir()
    try:
        episodes, frames = 0, 0

        def counted(episode: Episode) -> None:
            nonlocal episodes, frames
            episodes, frames = episodes + 1, frames + episode.length
            if on_episode is not None:
                on_episode(episode)

        stream = read_episodes(run_dir, selection, summary)
        first = next(stream, None)
        if first is None:
            raise ValueError(_empty(selection, summary))
        _write(itertools.chain([first], stream), source, output, selection, tmp, counted)
        summary.episodes, summary.frames = episodes, frames
        summary.bytes = tree_bytes(tmp)
        publish_dir(tmp, out)
    except BaseException:
        delete(tmp)
        raise
    return summary


def _write(
    episodes: Iterator[Episode],
    source: DatasetSource,
    output: Output,
    selection: Selection,
    folder: Path,
    on_episode: Callable[[Episode], None],
) -> None:
    if output.fmt == "minari":
        from rlpipe.datasets.minari_export import default_dataset_id, write_minari

        write_minari(
            episodes, source, folder, output.dataset_id or default_dataset_id(source.run_dir), on_episode
        )
        return
    from rlpipe.datasets.lerobot import write_lerobot

    write_lerobot(
        source,
        episodes,
        folder,
        images=output.images or "video",
        task=output.task,
        progress=on_episode,
        selection=selection,
    )


def _empty(selection: Selection, summary: Summary) -> str:
    """The one line for a selection that holds no episode: what was asked, what was dropped."""
    asked = []
    if selection.iterations is not None:
        asked.append("--iterations {}:{}".format(*selection.iterations))
    if selection.last is not None:
        asked.append(f"--last {selection.last}")
    if selection.envs is not None:
        asked.append(f"--envs {selection.envs}")
    if selection.min_return is not None:
        asked.append(f"--min-return {selection.min_return:g}")
    if selection.min_success:
        asked.append("--min-success")
    return (
        f"the selection ({' '.join(asked) or 'every stored iteration'}) holds no episode to export: "
        f"{summary.dropped_fragments} fragments dropped, {summary.dropped_by_filter} episodes filtered "
        "out; select more iterations, or --keep-last-fragment, or loosen the filters"
    )

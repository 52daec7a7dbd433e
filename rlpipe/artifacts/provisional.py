"""A run directory held by a start that may fail: failing before its run holds anything, it leaves none.

A run holds something once a checkpoint or a rollout is in it (:meth:`RunLayout.holds_run`): before
that, its folder carries only what the start wrote (``params.yaml``, ``curve.csv``) and a retry must
not trip over it. :func:`held_run_dir` takes the run's lock for the body; when the body raises
(an error, a signal's ``Interrupted``) while the run still holds nothing, a folder the call created
is renamed to a hidden ``.del`` temporary and deleted under the lock
(:func:`~rlpipe.artifacts.removal.delete`), so no reader sees it half-gone and no other start sees
it. A folder that was there before is left in place: it holds no run either, so a fresh start may
write over it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rlpipe.artifacts.fs import is_object
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.removal import clean_temporaries, delete

__all__ = ["held_run_dir"]


@contextlib.contextmanager
def held_run_dir(layout: RunLayout, command: str) -> Iterator[RunLayout]:
    """Hold ``layout.root``'s lock for the body (creating the folder); withdraw it if the start fails.

    Temporaries a killed earlier writer left at the folder's top (a half-written ``params.yaml``)
    are removed first. On an object store the folder is kept whatever happens (there is no rename).
    """
    created = not is_object(layout.root) and not layout.root.exists()
    with RunLock(layout.root, command):
        clean_temporaries(layout.root)
        try:
            yield layout
        except BaseException:
            if created and not layout.holds_run():
                with contextlib.suppress(OSError):  # the first failure is the one to report
                    delete(layout.root)  # the lock file goes with it: it was never a run
            raise

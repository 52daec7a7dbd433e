"""``python -m rlpipe`` (and ``torchrun -m rlpipe``) runs the CLI.

``python -m`` puts the working directory first on ``sys.path``; it is dropped before the CLI runs,
so the ``package.module:name`` references in params import from the Python path the user set up
(installed packages, ``PYTHONPATH``) as under the ``rlpipe`` console script, never from a module
lying in the working directory or a run directory below it.
"""

from __future__ import annotations

import os
import sys


def drop_working_directory(path: list[str]) -> None:
    """Remove the entry ``python -m`` put first on ``path`` (none under ``-P``/``PYTHONSAFEPATH``)."""
    if not sys.flags.safe_path and path and path[0] in ("", os.getcwd()):
        del path[0]


drop_working_directory(sys.path)

from rlpipe.cli import main  # noqa: E402  (after the path is the user's)

main()

"""The Isaac Lab lane runs only under ``make test-isaaclab`` (``RLPIPE_LANE=isaaclab``, the lane's own venv).

Anywhere else (``make test`` in the project's venv, which holds no Isaac Lab) these files are not
collected: the lane imports Isaac Lab for real and takes minutes.
"""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("RLPIPE_LANE") == "isaaclab" else ["*.py"]

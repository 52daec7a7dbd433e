"""``python -m rlpipe.isaaclab --task Isaac-Cartpole --num_envs 16 --device cpu``: train an Isaac Lab task.

``python -m`` puts the working directory first on ``sys.path``; it is dropped before anything else
is imported, as ``python -m rlpipe`` does, so params import code only from the Python path the
user set up.
"""

from __future__ import annotations

import os
import sys

if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from rlpipe import fast  # noqa: E402  (after the path is the user's)
from rlpipe.isaaclab.train import train  # noqa: E402

fast.run_then_exit(train)

"""The optional packages, as config's users have imported them: :mod:`rlpipe.extras` owns them.

Kept while modules on other branches (the datasets exporters, the trainer's built-in events) still
import this name; new code imports :mod:`rlpipe.extras`.
"""

from __future__ import annotations

from rlpipe.extras import MINARI, require, require_all

__all__ = ["MINARI", "require", "require_all"]

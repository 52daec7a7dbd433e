"""mkdocs hook: the table of rsl_rl ``train_cfg`` keys on ``rsl-rl-runner.md``, generated from the mapping.

The page holds the marker :data:`MARKER`; this hook replaces it with one row per entry of
``rlpipe.rsl_rl.keys.KEYS`` (the table the mapping itself reads its defaults from), so the page
lists exactly the keys the code knows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PAGE = "rsl-rl-runner.md"
MARKER = "<!-- rsl_rl: train_cfg keys -->"
ROOT = Path(__file__).resolve().parents[2]


def _keys() -> Any:
    if str(ROOT) not in sys.path:  # the checkout's rlpipe, as the reference pages read it
        sys.path.insert(0, str(ROOT))
    from rlpipe.rsl_rl import keys

    return keys


def _default(value: Any, missing: Any) -> str:
    return "—" if value is missing else f"`{json.dumps(value)}`"


def render(markdown: str) -> str:
    """``markdown`` with :data:`MARKER` replaced by the keys table."""
    keys = _keys()
    rows = ["| train_cfg key | rsl_rl default | in rlpipe |", "|---|---|---|"]
    rows += [f"| `{k.path}` | {_default(k.default, keys.NO_DEFAULT)} | {k.becomes} |" for k in keys.KEYS]
    return markdown.replace(MARKER, "\n".join(rows))


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Fill the table on :data:`PAGE`; other pages pass unchanged."""
    return render(markdown) if page.file.src_uri == PAGE else markdown

"""rlpipe: reproducible on-policy RL for massively parallel simulators, every rollout stored in Zarr.

``from rlpipe import Trainer`` is the Python face of ``rlpipe run``; it is imported on first use, so
``import rlpipe`` (and the CLI's ``--help``) stays free of torch.
"""

import time
from typing import Any

__all__ = ["IMPORTED_AT", "Callback", "EventContext", "Trainer", "__version__"]
from rlpipe import fast as _fast
from rlpipe.version import __version__

_fast.defer_dynamo_for_tensordict()

IMPORTED_AT = time.perf_counter()
"""``time.perf_counter()`` when rlpipe was first imported: the start of a run where ``/proc`` is absent."""


def __getattr__(name: str) -> Any:
    if name == "Trainer":
        from rlpipe.trainer import Trainer

        return Trainer
    if name in ("Callback", "EventContext"):
        from rlpipe.trainer import events

        return getattr(events, name)
    raise AttributeError(f"module 'rlpipe' has no attribute {name!r}")

"""The online run: :class:`Trainer` (``train()`` is the loop), its events, guards, stop rules and ranks."""

from rlpipe.trainer.events import Callback, EventContext, EventError, Events
from rlpipe.trainer.trainer import Trainer

__all__ = ["Callback", "EventContext", "EventError", "Events", "Trainer"]

"""rlpipe: reproducible on-policy RL for massively parallel simulators, every rollout stored in Zarr.

Importing the package loads nothing else (``rlpipe --help`` stays instant); the CLI and the
training path import what they need when they need it.
"""

import time

__all__ = ["IMPORTED_AT", "__version__"]
__version__ = "0.1.0"
IMPORTED_AT = time.perf_counter()
"""``time.perf_counter()`` when rlpipe was first imported: the start of a run where ``/proc`` is absent."""

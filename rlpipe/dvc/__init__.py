"""rlpipe under DVC: each experiment's run directory, finding runs by experiment name, and gc."""

__all__: list[str] = []

"""rlpipe: reproducible on-policy RL for massively parallel simulators, every rollout stored in Zarr."""

__all__ = ["__version__"]
__version__ = "0.1.0"

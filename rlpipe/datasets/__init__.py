"""Stored rollouts as datasets: episodes from the Zarr stores, written as LeRobot v3 or Minari."""

__all__: list[str] = []

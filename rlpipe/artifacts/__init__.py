"""The run directory on disk: layout, atomic writes, the Zarr rollout store and its shards, checkpoints."""

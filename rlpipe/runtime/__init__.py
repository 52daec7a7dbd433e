"""What the process runs on: torch threads, the allocator, seeding, the device and torch.distributed."""

__all__: list[str] = []

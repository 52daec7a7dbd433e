"""What the process runs on: threads, the allocator, seeding, the device, torch.distributed, memory."""

__all__: list[str] = []

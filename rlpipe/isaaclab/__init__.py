"""``python -m rlpipe.isaaclab``: Isaac Lab's train command, with rlpipe as the trainer."""

__all__: list[str] = []

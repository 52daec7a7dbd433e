"""The tasks rlpipe ships: CartPole, Pendulum, RepeatFirst (memory), DeepSea (exploration), PushCube."""

__all__: list[str] = []

"""The tasks rlpipe ships: CartPole, Pendulum, RepeatFirst (memory) and PushCube (MuJoCo)."""

__all__: list[str] = []

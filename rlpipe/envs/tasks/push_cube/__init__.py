"""PushCube: the scene (MJCF), the task (pure torch), the physics engines and the camera."""

__all__: list[str] = []

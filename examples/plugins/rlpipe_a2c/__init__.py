"""A plug-in algorithm (A2C) and a plug-in policy (a shared-trunk actor-critic), kept outside rlpipe.

With this folder (``examples/plugins``) on ``PYTHONPATH``, params name them like built-ins::

    algorithm: {name: rlpipe_a2c.algo:A2C, cfg: {learning_rate: 7.0e-4}}
    policy: {name: rlpipe_a2c.policy:SharedTrunkActorCritic, ...}

and every command (``run``, ``inspect``, ``replay``, ``update``, ``eval``, ``export``) works on the
run. An installed package would announce them as entry points instead (see ``docs/extending.md``).
"""

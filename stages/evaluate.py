"""DVC stage ``evaluate``: the final checkpoint on fresh eval envs, with the ``eval`` params.

deps:    stages/evaluate.py, the rlpipe code it runs, data/<exp_name>/{checkpoints,metrics.json}
params:  eval, env, policy, trainer.seed, trainer.device, tracking
metrics: data/<exp_name>/eval/metrics.json
"""

from rlpipe import config
from rlpipe.offline import commands as offline

if __name__ == "__main__":
    offline.evaluate_checkpoint(config.load("params.yaml"))

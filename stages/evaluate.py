"""DVC stage ``evaluate``: the final checkpoint on fresh eval envs, with the ``eval`` params.

deps:    stages/evaluate.py, the rlpipe code it runs, data/<exp_name>/{run.json,metrics.json}
params:  eval, env, policy, trainer.seed, trainer.device, tracking
run dir: the one data/<exp_name>/run.json names (the last train, or the experiment `dvc exp apply` restored)
metrics: data/<exp_name>/eval/metrics.json (copied from the run dir)
"""

from rlpipe.dvc_exps import run_stage
from rlpipe.offline import commands as offline

if __name__ == "__main__":
    run_stage("evaluate", offline.evaluate_checkpoint)

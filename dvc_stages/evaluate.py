"""DVC stage ``evaluate``: the final checkpoint on fresh eval envs, with the ``eval`` params.

deps:    stages/evaluate.py, the rlpipe code it runs, results/<exp_name>/{run.json,metrics.json}
params:  eval, env, policy, trainer.seed, trainer.device, tracking
run dir: the one results/<exp_name>/run.json names (the last train, or the experiment
         `dvc exp apply` restored);
         writes <run dir>/eval/, or data/exps/<DVC_EXP_NAME>/<exp_name>/eval/ if that run is another's
metrics: results/<exp_name>/eval/metrics.json (copied from there)
"""

from rlpipe.dvc.experiments import run_stage
from rlpipe.offline.commands import evaluate_checkpoint

if __name__ == "__main__":
    run_stage("evaluate", lambda cfg, out: evaluate_checkpoint(cfg, None, out.eval_metrics))

"""DVC stage ``reupdate``: offline re-update of the stored rollouts with the ``replay`` overrides.

deps:    stages/reupdate.py, the rlpipe code it runs, results/<exp_name>/{run.json,metrics.json}
params:  replay, algorithm, policy, env, trainer, checkpoint, tracking
run dir: the one results/<exp_name>/run.json names; writes <run dir>/reupdate/ (checkpoints too), or
         data/exps/<DVC_EXP_NAME>/<exp_name>/reupdate/ if that run is another experiment's
metrics: results/<exp_name>/reupdate/metrics.json, plots: results/<exp_name>/reupdate/curve.csv (copied)
"""

from rlpipe.artifacts.layout import RunLayout
from rlpipe.dvc.experiments import run_stage
from rlpipe.offline.replay import replay

if __name__ == "__main__":
    run_stage("reupdate", lambda cfg, out: replay(cfg, RunLayout(cfg.run_dir).rollouts, out.reupdate))

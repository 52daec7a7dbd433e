"""DVC stage ``reupdate``: offline re-update of the stored rollouts with the ``replay`` overrides.

deps:    stages/reupdate.py, the rlpipe code it runs, data/<exp_name>/{rollouts,checkpoints,metrics.json}
params:  replay, algorithm, policy, env, trainer, checkpoint, tracking
outs:    data/<exp_name>/reupdate/checkpoints
metrics: data/<exp_name>/reupdate/metrics.json
plots:   data/<exp_name>/reupdate/curve.csv
"""

from rlpipe import config
from rlpipe.artifacts.layout import RunLayout
from rlpipe.offline.replay import replay

if __name__ == "__main__":
    cfg = config.load("params.yaml")
    layout = RunLayout(cfg.run_dir)
    replay(cfg, rollouts=layout.rollouts, out=layout.reupdate)

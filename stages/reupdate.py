"""DVC stage ``reupdate``: offline re-update of the stored rollouts with the ``replay`` overrides.

deps:    stages/reupdate.py, the rlpipe code it runs, data/<exp_name>/{rollouts,checkpoints,metrics.json}
params:  replay, algorithm, policy, env, trainer, checkpoint, tracking
outs:    data/<exp_name>/reupdate/checkpoints
metrics: data/<exp_name>/reupdate/metrics.json
plots:   data/<exp_name>/reupdate/curve.csv
"""

from rlpipe import config, offline

if __name__ == "__main__":
    cfg = config.load("params.yaml")
    offline.replay(cfg, rollouts=cfg.run_dir / "rollouts", out=cfg.run_dir / "reupdate")

"""DVC stage ``train``: the online loop, ``rlpipe run params.yaml`` (collect → advantage → update …).

deps:    dvc_stages/train.py and the rlpipe code the loop runs (see dvc.yaml)
params:  trainer, env, policy, algorithm, store, checkpoint, tracking
run dir: data/exps/<DVC_EXP_NAME>/<exp_name>/ in a DVC experiment (rollouts, checkpoints, params.yaml
         stay there after the experiment ends), data/<exp_name>/ under plain `dvc repro`
outs:    results/<exp_name>/run.json (names the run dir), metrics.json (records the MLflow run id),
         curve.csv (one row per iteration): copied from the run dir, all cache: false
"""

from rlpipe.dvc.experiments import run_stage
from rlpipe.trainer import Trainer

if __name__ == "__main__":
    run_stage("train", lambda cfg, out: Trainer(cfg, overwrite=True).train())  # a re-run stage starts fresh

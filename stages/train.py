"""DVC stage ``train``: the online loop, ``rlpipe run params.yaml`` (collect → advantage → update …).

deps:    stages/train.py and the rlpipe code the loop runs (see dvc.yaml)
params:  trainer, env, policy, algorithm, store, checkpoint, tracking
outs:    data/<exp_name>/rollouts (cache: false), data/<exp_name>/checkpoints (persist: true, re-run: fresh)
metrics: data/<exp_name>/metrics.json (records the MLflow run id)
plots:   data/<exp_name>/curve.csv (one row per iteration)
"""

from rlpipe import config
from rlpipe.run import run

if __name__ == "__main__":
    run(config.load("params.yaml"), overwrite=True)  # a re-run stage starts fresh

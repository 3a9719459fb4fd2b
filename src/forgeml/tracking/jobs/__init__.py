"""Train and tune as scheduler jobs: the specs, the entry points, and the SDK that submits.

`submit_training` and `submit_tuning` record a job whose command is a module of this
package (`python -m forgeml.tracking.jobs.train SPEC_JSON`, no CLI in between) and run it
through the scheduler (`forgeml.scheduler.submit`); what they return is the job and the
`JobResult` it wrote. `forgeml train|finetune|tune` are thin callers of these.
"""

from forgeml.tracking.jobs._specs import (
    TRAIN_MODULE,
    TUNE_MODULE,
    TrainJobSpec,
    TuneJobSpec,
    submit_training,
    submit_tuning,
    train_job,
    tune_job,
)

__all__ = [
    "TRAIN_MODULE",
    "TUNE_MODULE",
    "TrainJobSpec",
    "TuneJobSpec",
    "submit_training",
    "submit_tuning",
    "train_job",
    "tune_job",
]

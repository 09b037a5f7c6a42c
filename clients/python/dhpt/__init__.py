"""DHPT's Python client: tune from Python the way Optuna users do, against a DHPT scheduler.

    import dhpt
    study = dhpt.create_study("demo", space={"x": (-5.0, 5.0)}, max_trials=20,
                              load_if_exists=True)            # DHPT_SCHEDULER, or scheduler=
    study.optimize(lambda trial: (trial.suggest_float("x", -5.0, 5.0) - 2) ** 2)
    print(study.best_trial.params)

See docs/python.md.
"""

from .agent import agent
from .client import Client, DEFAULT_RETRY_SECONDS, DEFAULT_SCHEDULER
from .errors import (AlreadyExists, DeadlineExceeded, DhptError, FailedPrecondition,
                     InvalidArgument, NotFound, PermissionDenied, ResourceExhausted, StudyEnded,
                     TrialPruned, Unauthenticated, Unavailable)
from .study import (Study, WatchEvent, categorical, create_study, delete_study, discrete,
                    float_range, get_all_studies, int_range, load_study)
from .trial import FrozenTrial, Trial, TrialState

__version__ = "0.1.0"

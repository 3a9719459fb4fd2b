"""Pipelines: YAML DAGs of typed steps, each a scheduler job, cached by content.

`load_pipeline` reads and validates a file (errors name the file, the step and the key);
`run_pipeline` runs it, taking each step whose key (`cache.py`) was seen before from the
cache; `list_runs`, `find_run` and `run_summary` read what was recorded.
"""

from forgeml.pipelines.load import Pipeline, load_pipeline
from forgeml.pipelines.runner import run_pipeline
from forgeml.pipelines.runs import StepState, find_run, list_runs, run_summary

__all__ = [
    "Pipeline",
    "StepState",
    "find_run",
    "list_runs",
    "load_pipeline",
    "run_pipeline",
    "run_summary",
]

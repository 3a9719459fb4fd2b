"""`forgeml demo`: the main job end to end on the embedded default (Adult census data).

The data ships with forgeml (`forgeml/data/demo`, read compressed); the recipes are the
ones of `examples/adult`, so the demo runs from the repository root.

Data: ingest -> clean -> validate -> split -> features, proven by rebuilding every version.
Training: an MLP trained on the split through the FeatureSpec, tracked in MLflow,
registered, promoted to @production, and its run shown; it runs as a scheduler job.
Serving: @production deployed as a model-server process behind the gateway, called with an
API key, its latency printed, then stopped. The loop: deployed again with every request
logged, a policy applied, a `forgeml server` started; new labelled data and a shifted request
stream arrive, the drift alert fires, a retrained challenger passes the gate, runs as a
canary and is promoted; the timeline is printed (`_demo_loop.py`). Then the audit chain is
verified.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.cli._output import print_table, say
from forgeml.core.errors import NotFoundError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

EXAMPLES = Path("examples/adult")
_COMPRESSED = ("", ".gz", ".zst")


def packaged_data() -> Path:
    """The folder of the Adult files shipped with forgeml (see its README.md)."""
    from importlib.resources import files

    return Path(str(files("forgeml.data").joinpath("demo")))


def _find(folder: Path, name: str) -> Path:
    """`folder/name`, plain or compressed."""
    for suffix in _COMPRESSED:
        if (folder / f"{name}{suffix}").exists():
            return folder / f"{name}{suffix}"
    raise NotFoundError(
        f"Demo data {folder / name} is missing; pass --data-dir a folder holding adult/ with "
        "adult.data and adult.test (plain, .gz or .zst), or leave it out to use the shipped copy."
    )


def _check_inputs(data_dir: Path | None) -> tuple[Path, Path]:
    folder = packaged_data() if data_dir is None else data_dir / "adult"
    train, test = _find(folder, "adult.data"), _find(folder, "adult.test")
    for name in ("clean.yaml", "expectations.yaml", "features.yaml", "train.yaml"):
        if not (EXAMPLES / name).exists():
            raise NotFoundError(
                f"Demo recipe {EXAMPLES / name} is missing; run from the repo root."
            )
    return train, test


def run_demo(data_dir: Path | None = None, loop: bool = True) -> None:
    """Run the main job and print what each step recorded.

    Args:
        data_dir: a folder holding `adult/`; None reads the copy shipped with forgeml.
        loop: also run the closed loop (drift -> alert -> retrain -> gate -> canary ->
            promote) against a `forgeml server` it starts.
    """
    from forgeml.core import audit
    from forgeml.core.configfile import load_yaml
    from forgeml.core.workspace import open_workspace
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.data.query import run_query

    train_path, test_path = _check_inputs(data_dir)
    workspace = open_workspace()
    say(f"[bold]forgeml demo[/bold]: FORGEML_HOME={workspace.settings.home.resolve()}")
    started = time.perf_counter()
    recipe = load_yaml(EXAMPLES / "clean.yaml")
    steps: list[tuple[str, str, int, str]] = []

    def note(step: str, recorded: pipeline.catalog.Recorded) -> str:
        version = recorded.version
        steps.append((step, version.ref, version.rows, version.digest[:12]))
        return version.ref

    raw = note("ingest", pipeline.add(workspace, "adult", train_path, IngestOptions()))
    raw_test = note("ingest", pipeline.add(workspace, "adult-test", test_path, IngestOptions()))
    clean_test = note("clean", pipeline.derive(workspace, "clean", raw_test, recipe).main)
    cleaned = note("clean", pipeline.derive(workspace, "clean", raw, recipe).main)
    validated = pipeline.derive(
        workspace, "validate", cleaned, load_yaml(EXAMPLES / "expectations.yaml")
    )
    note("validate", validated.main)
    for item in validated.sides.values():
        note("quarantine", item)
    split = note(
        "split",
        pipeline.derive(
            workspace,
            "split",
            validated.main.version.ref,
            {"ratios": [0.8, 0.1, 0.1], "stratify": "Y", "seed": 0},
        ).main,
    )
    featured = pipeline.derive(workspace, "features", split, load_yaml(EXAMPLES / "features.yaml"))
    note("features", featured.main)
    print_table("dataset versions", ["step", "version", "rows", "digest"], steps)
    if featured.feature_spec is not None:
        spec = featured.feature_spec
        say(f"FeatureSpec {spec.name}@v{spec.version} fitted on the train split of {split}")

    by_sex = run_query(
        workspace,
        f"SELECT sex, __split__ AS split, count(*) AS rows, "
        f"round(avg(CASE WHEN Y = '>50K' THEN 1 ELSE 0 END), 3) AS positive_rate "
        f'FROM "{split}" GROUP BY ALL ORDER BY ALL',
    )
    print_table(
        "positive rate by sex and split (data query)",
        by_sex.column_names,
        [list(row.values()) for row in by_sex.to_pylist()],
    )

    for _, ref, _, _ in steps:
        pipeline.rebuild(workspace, ref)
    say(f"rebuilt all {len(steps)} versions from their lineage: every digest matches")
    say(f"data part done in {time.perf_counter() - started:.1f}s")
    model_name = _train(workspace, split)
    if model_name is not None:
        from forgeml.cli._demo_serve import serve_demo

        serve_demo(workspace, f"{model_name}@production", clean_test)
        if loop:
            from forgeml.cli._demo_loop import loop_demo

            loop_demo(workspace, model_name, raw, clean_test)
    with workspace.store.session() as session:
        chain = audit.verify(session)
    say(f"audit log intact: {chain.events} events")
    say(f"demo done in {time.perf_counter() - started:.1f}s")


def _train(workspace: Workspace, split: str) -> str | None:
    """Train the Adult MLP on `split` as a scheduler job; register, promote, show its run.

    Returns:
        The registered model's name (its best version holds @production), if one was.
    """
    from forgeml.tracking import get_model_version, promote
    from forgeml.tracking.jobs import TrainJobSpec, submit_training
    from forgeml.train.config import load_config

    config_path = EXAMPLES / "train.yaml"
    config = load_config(str(config_path), [f"data.dataset={split}"])
    say(
        f"training {config.name} on {split} ({config.epochs} epochs, tracked in MLflow) "
        "as a job through the scheduler's local executor ..."
    )
    spec = TrainJobSpec(config=config.model_dump(mode="json"))
    job, result = submit_training(workspace, spec, name=config.name, workers=config.workers)
    if result is None:
        raise NotFoundError(f"Training job {job.id} succeeded but left no result.")
    summary = result.outputs
    attempt = _attempt_usage(workspace, job.id)
    say(f"job {job.id[:12]} {job.state}: {attempt}")
    metrics = summary["metrics"]
    rows = [
        (name, f"{metrics[name]:.4f}", f"{metrics['test_' + name]:.4f}")
        for name in ("accuracy", "f1_macro", "roc_auc", "loss")
    ]
    rows += [
        (
            f"accuracy sex={sex}",
            f"{metrics[f'accuracy/sex={sex}']:.4f}",
            f"{metrics[f'test_accuracy/sex={sex}']:.4f}",
        )
        for sex in ("Female", "Male")
    ]
    run_id = str(summary["run_id"])
    title = f"run {run_id[:12]}: {summary['status']} after {summary['steps']} steps"
    print_table(title, ["metric", "validation", "test"], rows)
    if not summary.get("model"):
        return None
    model = get_model_version(workspace, str(summary["model"]))
    say(f"registered {model.ref}: dataset {split} -> run {run_id[:12]} -> model {model.ref}")
    if _beats_production(workspace, model.name, float(metrics["accuracy"])):
        promote(workspace, model.name, model.version, "production", "accuracy")
        say(f"promoted {model.ref} to @production (gate: validation accuracy)")
    return model.name


def _attempt_usage(workspace: Workspace, job_id: str) -> str:
    """What the job's last attempt used and cost, in one line."""
    from forgeml.scheduler.jobs import attempts_of

    with workspace.store.session() as session:
        attempts = attempts_of(session, job_id)
    if not attempts:
        return "no attempt recorded"
    last = attempts[-1]
    return (
        f"{last.cpu_seconds:.1f} CPU-s, {last.wall_seconds:.1f} s wall, "
        f"cost {last.cost:.4f} (forgeml cost report --by job)"
    )


def _beats_production(workspace: Workspace, name: str, accuracy: float) -> bool:
    """Promotion is gated; the demo only asks when the new version passes the gate."""
    from forgeml.tracking import get_model_version

    try:
        holder = get_model_version(workspace, f"{name}@production")
    except NotFoundError:
        return True
    return accuracy > float((holder.metrics or {}).get("accuracy", 0))

"""`forgeml monitor ...`: drift between dataset versions or of live requests, online drift
over a request log, feedback and live accuracy; the alert rules and dashboard; policies."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli import _policies
from forgeml.cli._output import print_json, print_table, say, step

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.monitor.accuracy import AccuracyReport
    from forgeml.monitor.drift import (
        ColumnDrift,
        DriftConfig,
        DriftReport,
        LiveSource,
        MultivariateDrift,
    )

app = typer.Typer(
    help="Watch models after they ship: drift, feedback, accuracy, alert rules, dashboards, "
    "and the policies that retrain and release them.",
    no_args_is_help=True,
)
app.add_typer(_policies.app, name="policy")


def _split_names(columns: str | None) -> list[str] | None:
    if columns is None:
        return None
    from forgeml.core.errors import UsageError

    names = [name.strip() for name in columns.split(",") if name.strip()]
    if not names:
        raise UsageError("--columns names no column: give a comma-separated list such as a,b.")
    return names


PLOT_WINDOWS = 24  # the latest windows --png draws


@app.command("drift")
def drift(
    target: Annotated[
        str | None,
        typer.Argument(
            help="Live: a deployment, or a model version (NAME, NAME@vN, NAME@alias); its "
            "training data is the reference and its request log(s) the current window.",
            show_default=False,
        ),
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(help="The reference dataset version (NAME, NAME@vN or NAME@<digest>)."),
    ] = None,
    current: Annotated[
        str | None, typer.Option(help="The dataset version to check against it.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Live: a model version (the same as giving it as the argument)."),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option(
            help="Live: the request log (default: FORGEML_HOME/logs/requests/NAME.jsonl, and "
            "a deployment's replicas' logs)."
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Live: the name the model is served under (default: its own)."),
    ] = None,
    window: Annotated[
        int,
        typer.Option(
            help="Live: compare the latest this many logged rows (small windows flag columns "
            "by chance more often: benchmarks/drift_windows.py).",
            min=1,
        ),
    ] = 2000,
    columns: Annotated[
        str | None, typer.Option(help="Only these feature columns, comma-separated.")
    ] = None,
    reference_split: Annotated[
        str | None, typer.Option(help="Only this split of the reference: train, validation, test.")
    ] = None,
    current_split: Annotated[
        str | None, typer.Option(help="Only this split of the current version.")
    ] = None,
    prediction: Annotated[
        str | None, typer.Option(help="A column of both versions holding predictions.")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="YAML of drift thresholds (alpha, psi_threshold, ...; see the docs)."),
    ] = None,
    png: Annotated[
        Path | None,
        typer.Option(
            help=f"Live: also draw each feature's score over the latest {PLOT_WINDOWS} "
            "consecutive windows of --window rows into this PNG."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Compare two dataset versions column by column: PSI, KS, chi-square, Wasserstein, JS.

    Or, live, a deployment's or a model version's latest logged requests against its
    training data: per feature, whole rows (domain classifier; MMD of text embeddings)
    and the model's answers against its answers on the validation split.
    A column drifts only when its p-value is below alpha AND an effect size passes a threshold.
    """
    from forgeml.core.configfile import load_yaml_model
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.drift import DriftConfig

    names = _split_names(columns)
    settings = load_yaml_model(config, DriftConfig) if config else DriftConfig()
    if target is not None and model is not None:
        raise UsageError("Name the model once: as the argument or with --model, not both.")
    live = target or model
    if live is not None and (reference or current or reference_split or current_split):
        raise UsageError(
            "A live check compares a model's requests with its training data: "
            "leave out --reference, --current and the splits."
        )
    if live is None and png is not None:
        raise UsageError("--png draws a live request log over time: name a deployment or model.")
    if live is not None:
        args = _LiveArgs(log, name, window, names, settings, png, as_json)
        _live(open_workspace(), live, args)
        return
    if reference is None or current is None:
        raise UsageError(
            "Give --reference and --current (two dataset versions), or a deployment or "
            "model (live requests)."
        )
    _versions(
        open_workspace(), (reference, reference_split), (current, current_split), prediction,
        names, settings, as_json,
    )  # fmt: skip


def _versions(
    workspace: Workspace,
    old_ref: tuple[str, str | None],
    new_ref: tuple[str, str | None],
    prediction: str | None,
    names: list[str] | None,
    settings: DriftConfig,
    as_json: bool,
) -> None:
    from forgeml.data import catalog
    from forgeml.monitor.drift import build_reference, detect_drift, text_embedder

    with workspace.store.session() as session:
        old = catalog.resolve_to_read(workspace, session, old_ref[0])
        new = catalog.resolve_to_read(workspace, session, new_ref[0])
    with step(f"comparing {new.ref} with {old.ref}"):
        profile = build_reference(
            catalog.read_frame(workspace, old, old_ref[1]), prediction=prediction
        )
        frame = catalog.read_frame(workspace, new, new_ref[1])
        embed = text_embedder(profile, names)
        report = detect_drift(profile, frame, settings, names, multivariate=True, embed=embed)
    if as_json:
        print_json({"reference": old.ref, "current": new.ref, **report.model_dump(mode="json")})
        return
    _print_report(old.ref, new.ref, report)


@dataclass(frozen=True)
class _LiveArgs:
    log: Path | None
    name: str | None
    window: int
    names: list[str] | None
    settings: DriftConfig
    png: Path | None
    as_json: bool


def _source(workspace: Workspace, target: str, args: _LiveArgs) -> LiveSource:
    """A deployment called `target`, else the model version `target` names."""
    from forgeml.core.errors import NotFoundError, UsageError
    from forgeml.monitor.drift import LiveSource, deployment_source, request_log_path
    from forgeml.tracking import get_model_version

    found = deployment_source(workspace, target)
    if found is not None:
        if args.name is not None:
            raise UsageError(
                f"'{target}' is a deployment, served under its own name: leave out --name."
            )
        return found if args.log is None else replace(found, logs=[args.log])
    try:
        record = get_model_version(workspace, target)
    except NotFoundError:
        if "@" in target:  # a model version (deployment names have no @): its own sentence
            raise
        raise NotFoundError(
            f"No deployment or registered model is called '{target}'; see `forgeml deploy "
            "list` and `forgeml models list`."
        ) from None
    served = args.name or record.name
    logs = [args.log or request_log_path(workspace, served)]
    return LiveSource(f"{record.name}@v{record.version}", served, logs, version=None)


def _live(workspace: Workspace, target: str, args: _LiveArgs) -> None:
    from forgeml.monitor.drift import (
        detect_drift,
        latest_windows,
        model_reference,
        plot_drift,
        read_requests,
        text_embedder,
    )

    source = _source(workspace, target, args)
    with step(f"reading the reference of {source.model_ref}"):
        ref, profile = model_reference(workspace, source.model_ref)
    served = source.served or ref.partition("@")[0]
    everything = args.png is not None
    limit = None if everything else args.window
    requests = read_requests(source.logs, served, limit, source.version)
    rows = requests.frame.tail(args.window)
    outputs = None if requests.outputs is None else requests.outputs.tail(args.window)
    known = [column for column in rows.columns if column in profile.columns]
    checked = args.names or known
    embed = text_embedder(profile, checked, workspace, ref)
    report = detect_drift(
        profile, rows, args.settings, checked, multivariate=True, embed=embed, outputs=outputs
    )
    windows = []
    if args.png is not None:
        windows = latest_windows(
            profile, requests, args.window, PLOT_WINDOWS, checked, args.settings
        )
        plot_drift(windows, args.png, f"drift of '{served}' ({ref}) per window")
    current = f"the latest {rows.height} requests to '{served}'"
    if args.as_json:
        body: dict[str, Any] = {"reference": ref, "current": current, "rows": rows.height}
        body |= {"deployment": source.deployment, "logs": [str(p) for p in source.logs]}
        body["log"] = str(source.logs[0])
        if args.png is not None:
            body |= {"png": str(args.png), "windows": [w.model_dump(mode="json") for w in windows]}
        print_json({**body, **report.model_dump(mode="json")})
        return
    _print_report(ref, current, report)
    if args.png is not None:
        say(f"wrote {args.png}: {len(windows)} windows of {args.window} rows")


def _number(value: float | None, spec: str = ".3g") -> str:
    return "" if value is None else format(value, spec)


def _row(result: ColumnDrift) -> list[Any]:
    effect = f"{result.effect} {_number(result.effect_size)}" if result.effect else ""
    missing = f"{result.missing.reference:.1%} -> {result.missing.current:.1%}"
    return [
        result.column,
        result.kind,
        result.test,
        _number(result.statistic),
        _number(result.p_value, ".2e"),
        effect,
        missing,
        "[bold red]yes[/bold red]" if result.drifted else "no",
    ]


def _print_report(old: str, new: str, report: DriftReport) -> None:
    headers = ["column", "kind", "test", "statistic", "p-value", "effect", "missing", "drifted"]
    results = list(report.columns)
    if report.prediction is not None:
        label = f"{report.prediction.column} (prediction)"
        results.append(report.prediction.model_copy(update={"column": label}))
    for output in report.predictions:
        results.append(output.model_copy(update={"column": f"{output.column} (model output)"}))
    rows = [_row(result) for result in results]
    if any(result.note for result in results):  # the column only where something needs it
        headers.append("note")
        rows = [[*row, result.note or ""] for row, result in zip(rows, results, strict=True)]
    print_table(f"drift of {new} against {old}", headers, rows)
    if report.multivariate:
        print_table(
            "whole rows",
            ["detector", "columns", "rows (reference / current)", "statistic", "p-value",
             "threshold", "drifted"],
            [_multivariate_row(found) for found in report.multivariate],
        )  # fmt: skip
    share = f"{len(report.drifted_columns)} of {len(report.columns)} columns"
    verdict = "yes" if report.drifted else "no"
    line = f"drifted: {share} ({report.drifted_share:.0%}); dataset drift: {verdict}"
    if report.multivariate:
        whole = [found.detector for found in report.multivariate if found.drifted]
        line += f"; whole rows: {', '.join(whole) or 'no'}"
    if report.predictions:
        line += f"; predictions: {'yes' if report.predictions_drifted else 'no'}"
    say(line)


def _multivariate_row(found: MultivariateDrift) -> list[Any]:
    verdict = "[bold red]yes[/bold red]" if found.drifted else "no"
    return [
        found.detector,
        len(found.columns),
        f"{found.reference_rows} / {found.current_rows}",
        _number(found.statistic),
        _number(found.p_value, ".2e"),
        _number(found.threshold),
        verdict if found.note is None else f"{verdict} ({found.note})",
    ]


def _request_log(workspace: Workspace, served: str, log: Path | None) -> Path:
    return log or Path(workspace.settings.home) / "logs" / "requests" / f"{served}.jsonl"


def _served(workspace: Workspace, model: str | None, deployment: str | None) -> tuple[str, str]:
    """The served name and the model reference of `--model` or `--deployment`."""
    from forgeml.core.errors import UsageError

    if (model is None) == (deployment is None):
        raise UsageError(
            "Give --model (a model served on its own) or --deployment, one of the two."
        )
    if deployment is not None:
        from forgeml.serve.deployments import get_deployment

        return deployment, get_deployment(workspace, deployment).spec.model
    return (model or "").partition("@")[0], model or ""


_LOG_HELP = "The request log (default: FORGEML_HOME/logs/requests/NAME.jsonl)."


@app.command("feedback")
def feedback(
    file: Annotated[Path, typer.Argument(help="CSV or JSON lines (.jsonl) with id and label.")],
    model: Annotated[
        str | None, typer.Option(help="The model served on its own (NAME, NAME@vN, NAME@alias).")
    ] = None,
    deployment: Annotated[str | None, typer.Option(help="The deployment that answered.")] = None,
    log: Annotated[Path | None, typer.Option(help=_LOG_HELP)] = None,
) -> None:
    """Record labels that arrived later for logged predictions, by request id.

    Every id must name a request the served model's log holds, or nothing is recorded.
    """
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.feedback import record_file

    workspace = open_workspace()
    served, _ = _served(workspace, model, deployment)
    requests, rows = record_file(workspace, file, served, _request_log(workspace, served, log))
    say(f"recorded {rows} labelled row(s) of {requests} request(s) for '{served}'")


@app.command("accuracy")
def accuracy(
    target: Annotated[
        str, typer.Argument(metavar="MODEL|DEPLOYMENT", help="A deployment, or a model version.")
    ],
    window: Annotated[
        int, typer.Option(help="The latest this many labelled (and logged) predictions.", min=1)
    ] = 2000,
    slices: Annotated[
        list[str] | None,
        typer.Option("--slice", help="Also per value of this feature column (repeatable)."),
    ] = None,
    log: Annotated[Path | None, typer.Option(help=_LOG_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Live accuracy (MAE for regressors) from feedback, beside the estimate without labels.

    The estimate is the mean calibrated confidence of the latest logged predictions
    (calibrated once on the model version's validation split, CBPE-style).
    """
    from forgeml.core.errors import NotFoundError
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.accuracy import live_accuracy

    workspace = open_workspace()
    try:
        served, _ = _served(workspace, None, target)
    except NotFoundError:
        served, _ = _served(workspace, target, None)
    # a bare name or a deployment: the version that answered; NAME@vN or @alias: that one
    model_ref = target if "@" in target else None
    with step(f"measuring {served}"):
        report = live_accuracy(
            workspace, served, model_ref, window, slices, _request_log(workspace, served, log)
        )
    if as_json:
        print_json(report.model_dump(mode="json"))
        return
    _print_accuracy(report)


def _print_accuracy(report: AccuracyReport) -> None:
    measure = "mae" if report.task == "regression" else "accuracy"
    headers = ["slice", "rows", measure]
    if report.task == "classification":
        headers.append("estimated")
    overall = ["(all)", report.labelled_rows, getattr(report, measure), report.estimated_accuracy]
    rows = [overall] + [
        [f"{s.column}={s.value}", s.rows, getattr(s, measure), s.estimated_accuracy]
        for s in report.slices
    ]
    table = [[r[0], r[1], *(_number(v, ".3f") for v in r[2 : len(headers)])] for r in rows]
    print_table(f"{measure} of '{report.served}' ({report.model})", headers, table)
    reference = report.reference_mae if report.task == "regression" else report.reference_accuracy
    say(f"reference {measure} (validation split): {_number(reference, '.3f')}")
    if report.task == "classification":
        say(
            f"estimated from the latest {report.estimated_rows} predictions "
            f"({report.estimated_from}), without labels"
        )


# OnlineDriftConfig's field descriptions, copied so --help loads no polars (importing
# forgeml.monitor.drift does); tests/monitor/drift/test_online_cli.py compares the two
_ONLINE_HELP = {
    "run_length": "Expected rows between false alarms (ARL) on data like the reference.",
    "shift": "The mean shift, in reference standard deviations, detected fastest (the "
    "CUSUM's reference value k is half of it).",
    "calibration_runs": "Simulated in-control runs that calibrate the threshold (the ARL it "
    "gives is within about 1/sqrt(runs) of the one set).",
}


@app.command("online")
def online(
    model: Annotated[
        str | None,
        typer.Argument(
            help="A model version (NAME, NAME@vN, NAME@alias): its training data is the "
            "reference. Without it, the log's first --reference-rows rows are."
        ),
    ] = None,
    run_length: Annotated[
        int, typer.Option(help=_ONLINE_HELP["run_length"], min=10, max=10_000_000)
    ] = 10_000,
    log: Annotated[
        Path | None,
        typer.Option(help="The request log (default: FORGEML_HOME/logs/requests/NAME.jsonl)."),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(help="The name the model is served under (default: its own)."),
    ] = None,
    shift: Annotated[float, typer.Option(help=_ONLINE_HELP["shift"])] = 0.5,
    calibration_runs: Annotated[int, typer.Option(help=_ONLINE_HELP["calibration_runs"])] = 500,
    reference_rows: Annotated[
        int,
        typer.Option(
            help="Without MODEL: the log's first rows that are the reference (the fewer, the "
            "more the reference's centre is off, and the shorter the run length in fact).",
            min=10,
        ),
    ] = 2000,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Replay a served model's request log through the online drift detector: where it alarmed.

    A two-sided CUSUM per numeric feature, its threshold calibrated so that on data like
    the reference a false alarm comes once per --run-length rows on average.
    """
    from forgeml.core.errors import ConfigError, UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.monitor.drift import OnlineDriftConfig, OnlineDriftDetector, read_log

    config = _validated(
        OnlineDriftConfig, run_length=run_length, shift=shift, calibration_runs=calibration_runs
    )
    workspace = open_workspace()
    cache = Path(workspace.settings.home) / "monitor" / "online" / "calibrations"
    if model is not None:
        from forgeml.monitor.drift import model_reference

        with step(f"reading the reference of {model}"):
            ref, profile = model_reference(workspace, model)
        served = name or ref.partition("@")[0]
        path = log or Path(workspace.settings.home) / "logs" / "requests" / f"{served}.jsonl"
        logged = read_log(path, served)
        with step(f"calibrating the detector to {run_length} rows between false alarms"):
            detector = OnlineDriftDetector.from_profile(profile, config, cache)
        start = 0
    elif log is not None:
        path, ref = log, f"the first {reference_rows} rows of the log"
        logged = read_log(path, name)
        if logged.rows.height <= reference_rows:
            raise ConfigError(
                f"The log holds {logged.rows.height} rows for '{logged.model}', no more than "
                f"the {reference_rows} reference rows: lower --reference-rows or log more."
            )
        with step(f"calibrating the detector to {run_length} rows between false alarms"):
            detector = OnlineDriftDetector.fit(logged.rows.head(reference_rows), config, cache)
        start = reference_rows
    else:
        raise UsageError("Give MODEL (a model version) or --log FILE (a request log).")
    alarms = detector.update(logged.rows.slice(start))
    found = [
        {**alarm.model_dump(), "row": alarm.row + start, "time": logged.times[alarm.row + start]}
        for alarm in alarms
    ]
    summary = {
        "model": logged.model,
        "reference": ref,
        "log": str(path),
        "rows": logged.rows.height - start,
        "features": detector.features,
        "run_length": run_length,
        "threshold": detector.threshold,
        "alarms": found,
    }
    if as_json:
        print_json(summary)
        return
    _print_alarms(summary)


def _validated(model: Any, **values: Any) -> Any:
    from pydantic import ValidationError

    from forgeml.core.errors import UsageError

    try:
        return model(**values)
    except ValidationError as error:
        first = error.errors()[0]
        raise UsageError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}.") from None


def _print_alarms(summary: dict[str, Any]) -> None:
    from datetime import UTC, datetime

    def when(stamp: float | None) -> str:
        return "" if stamp is None else datetime.fromtimestamp(stamp, UTC).isoformat(" ", "seconds")

    rows = [
        [
            alarm["row"],
            when(alarm["time"]),
            alarm["feature"],
            alarm["direction"],
            f"{alarm['statistic']:.3g}",
        ]
        for alarm in summary["alarms"]
    ]
    title = f"online drift of '{summary['model']}' against {summary['reference']}"
    print_table(title, ["row", "time", "feature", "direction", "statistic"], rows)
    say(
        f"{len(rows)} alarm(s) in {summary['rows']} rows over {len(summary['features'])} "
        f"numeric features (one false alarm per {summary['run_length']} rows expected)"
    )


@app.command()
def rules() -> None:
    """Print forgeml's Prometheus alert rules (a rule file for `rule_files:`)."""
    from forgeml.monitor.assets import rules_text

    typer.echo(rules_text(), nl=False)


@app.command()
def dashboard() -> None:
    """Print forgeml's Grafana dashboard (JSON, to import into Grafana)."""
    from forgeml.monitor.assets import dashboard_text

    typer.echo(dashboard_text(), nl=False)

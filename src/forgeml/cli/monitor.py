"""`forgeml monitor ...`: drift between dataset versions, online drift over a request log;
the alert rules and dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, step

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.monitor.drift import ColumnDrift, DriftConfig, DriftReport

app = typer.Typer(
    help="Watch models after they ship: drift, alert rules, dashboards.", no_args_is_help=True
)


def _split_names(columns: str | None) -> list[str] | None:
    if columns is None:
        return None
    from forgeml.core.errors import UsageError

    names = [name.strip() for name in columns.split(",") if name.strip()]
    if not names:
        raise UsageError("--columns names no column: give a comma-separated list such as a,b.")
    return names


@app.command("drift")
def drift(
    reference: Annotated[
        str | None,
        typer.Option(help="The reference dataset version (NAME, NAME@vN or NAME@<digest>)."),
    ] = None,
    current: Annotated[
        str | None, typer.Option(help="The dataset version to check against it.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Live: a model version (NAME, NAME@vN, NAME@alias); its training data is "
            "the reference and its server's request log the current window."
        ),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option(
            help="Live: the request log (default: FORGEML_HOME/logs/requests/NAME.jsonl)."
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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Compare two dataset versions column by column: PSI, KS, chi-square, Wasserstein, JS.

    Or, with --model, a served model's latest logged requests against its training data.
    A column drifts only when its p-value is below alpha AND an effect size passes a threshold.
    """
    from forgeml.core.configfile import load_yaml_model
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.data import catalog
    from forgeml.monitor.drift import DriftConfig, build_reference, detect_drift

    names = _split_names(columns)
    settings = load_yaml_model(config, DriftConfig) if config else DriftConfig()
    workspace = open_workspace()
    if model is not None:
        if reference or current or reference_split or current_split:
            raise UsageError(
                "--model compares a served model's requests with its training data: "
                "leave out --reference, --current and the splits."
            )
        _live(workspace, model, log, name, window, names, settings, as_json)
        return
    if reference is None or current is None:
        raise UsageError(
            "Give --reference and --current (two dataset versions), or --model (live requests)."
        )
    with workspace.store.session() as session:
        old, new = catalog.resolve(session, reference), catalog.resolve(session, current)
    with step(f"comparing {new.ref} with {old.ref}"):
        profile = build_reference(
            catalog.read_frame(workspace, old, reference_split), prediction=prediction
        )
        report = detect_drift(
            profile, catalog.read_frame(workspace, new, current_split), settings, names
        )
    if as_json:
        print_json({"reference": old.ref, "current": new.ref, **report.model_dump(mode="json")})
        return
    _print_report(old.ref, new.ref, report)


def _live(
    workspace: Workspace,
    model: str,
    log: Path | None,
    name: str | None,
    window: int,
    names: list[str] | None,
    settings: DriftConfig,
    as_json: bool,
) -> None:
    from forgeml.monitor.drift import detect_drift, model_reference, read_window

    with step(f"reading the reference of {model}"):
        ref, profile = model_reference(workspace, model)
    served = name or ref.partition("@")[0]
    path = log or Path(workspace.settings.home) / "logs" / "requests" / f"{served}.jsonl"
    rows = read_window(path, served, window)
    known = [column for column in rows.columns if column in profile.columns]
    report = detect_drift(profile, rows, settings, names or known)
    current = f"the latest {rows.height} requests to '{served}'"
    if as_json:
        body = {"reference": ref, "current": current, "log": str(path), "rows": rows.height}
        print_json({**body, **report.model_dump(mode="json")})
        return
    _print_report(ref, current, report)


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
    rows = [_row(result) for result in results]
    if any(result.note for result in results):  # the column only where something needs it
        headers.append("note")
        rows = [[*row, result.note or ""] for row, result in zip(rows, results, strict=True)]
    print_table(f"drift of {new} against {old}", headers, rows)
    share = f"{len(report.drifted_columns)} of {len(report.columns)} columns"
    verdict = "yes" if report.drifted else "no"
    say(f"drifted: {share} ({report.drifted_share:.0%}); dataset drift: {verdict}")


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

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from huggingface_hub import ModelCard
from sqlalchemy import select

from forgeml.core.errors import NotFoundError, UsageError
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.governance._card_facts import Metric, gather, split_metrics
from forgeml.governance.cards import build_card, card_html, model_card, set_card_notes, table
from forgeml.tracking import get_model_version, open_client
from forgeml.tracking.card_notes import MAX_NOTE_CHARS, NOTE_TAGS
from tests.governance.conftest import ATTEMPT, CARD_JOB, CARD_MODEL
from tests.train.conftest import ADULT_CSV

XSS = '<script>alert(1)</script><img src=x onerror="alert(2)"> [go](javascript:alert(3))'


def _parsed(workspace: Workspace, tmp_path: Path) -> ModelCard:
    path = tmp_path / "README.md"
    path.write_text(model_card(workspace, CARD_MODEL), encoding="utf-8")
    return ModelCard.load(path)


def test_front_matter_parses_with_huggingface_hub_and_holds_the_recorded_metrics(
    card_workspace: Workspace, tmp_path: Path
) -> None:
    metrics = get_model_version(card_workspace, CARD_MODEL).metrics
    card = _parsed(card_workspace, tmp_path)

    assert (card.data.license, card.data.datasets) == ("unknown", ["adult@v4"])
    assert card.data.model_name == CARD_MODEL
    assert set(card.data.metrics) == {"accuracy", "f1_macro", "loss", "roc_auc"}
    results = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert results[("validation", "accuracy")] == round(metrics["accuracy"], 6)
    assert results[("test", "roc_auc")] == round(metrics["test_roc_auc"], 6)
    assert len(results) == 8  # four metrics on two splits
    assert {r.dataset_name for r in card.data.eval_results} == {"adult@v4"}


def test_per_slice_tables_hold_each_groups_recorded_figures(card_workspace: Workspace) -> None:
    metrics = get_model_version(card_workspace, CARD_MODEL).metrics
    text = model_card(card_workspace, CARD_MODEL)

    for split, prefix in (("test", "test_"), ("validation", "")):
        assert f"Split `{split}`:" in text
        for group in ("sex=Female", "sex=Male", "race=Black", "race=White"):
            column, value = group.split("=")
            figures = [f"{metrics[f'{prefix}count/{group}']:.0f}"] + [
                f"{metrics[f'{prefix}{name}/{group}']:.4f}"
                for name in ("accuracy", "f1_macro", "loss", "roc_auc")
            ]
            assert f"| {column} | {value} | {' | '.join(figures)} |" in text


def test_training_data_cites_the_lineage_down_to_the_ingested_source(
    card_workspace: Workspace,
) -> None:
    text = model_card(card_workspace, CARD_MODEL)

    with card_workspace.store.session() as session:
        versions = {n: catalog.resolve(session, f"adult@v{n}") for n in (1, 2, 3, 4)}
    for number, op in ((4, "split"), (3, "validate"), (2, "clean"), (1, "ingest")):
        version = versions[number]
        assert f"| `adult@v{number}` | {op} | {version.rows} | `{version.digest}` |" in text
    source_digest = versions[1].recipe["params"]["source_digest"]
    assert f"Source: `{ADULT_CSV.resolve()}` (SHA-256 `{source_digest}`)." in text
    assert "Features: the feature spec `adult-features`." in text


def test_compute_and_cost_come_from_the_jobs_attempts(card_workspace: Workspace) -> None:
    text = model_card(card_workspace, CARD_MODEL)

    assert f"| job | `{CARD_JOB}` (`" in text
    assert f"| wall time (s) | {ATTEMPT['wall_seconds']:.1f} |" in text
    assert f"| CPU time (core-seconds) | {ATTEMPT['cpu_seconds']:.1f} |" in text
    assert f"| GPU time (GPU-seconds) | {ATTEMPT['gpu_seconds']:.1f} |" in text
    assert f"| cost (USD) | {ATTEMPT['cost']:.4f} |" in text
    assert "| GPU energy (J) | not recorded |" in text


def test_annex_iv_headings_are_filled_from_records_or_say_not_recorded(
    card_workspace: Workspace,
) -> None:
    text = model_card(card_workspace, CARD_MODEL)
    annex = text.split("## EU AI Act Annex IV", 1)[1]

    headings = [line for line in annex.splitlines() if line.startswith("### ")]
    assert headings == [
        "### 1. General description of the AI system",
        "### 2. Development process and design choices (Annex IV 2(a)-(c))",
        "### Data requirements (Annex IV 2(d))",
        "### 3. Monitoring, functioning and control",
        "### 5. Risk management system",
    ]
    assert "- Intended purpose: not recorded." in annex
    assert "- Training: 20 steps, batch size 256, optimizer `adamw`" in annex
    assert "`adult@v4` (split) <- `adult@v3` (validate)" in annex
    monitoring = annex.split("### 3. Monitoring, functioning and control", 1)[1]
    assert monitoring.split("###", 1)[0].strip() == "not recorded"
    assert "Performance per group (race, sex): see Per slice." in annex


def test_without_notes_the_card_says_so(card_workspace: Workspace) -> None:
    text = model_card(card_workspace, CARD_MODEL)

    assert "## Intended use\n\nnot recorded\n" in text
    assert "## Limitations\n\nnot recorded\n" in text


def test_the_runs_measured_fairness_is_in_the_card(card_workspace: Workspace) -> None:
    # the run names slices (sex, race), so training measured them with fairlearn
    version = get_model_version(card_workspace, CARD_MODEL)
    dp_sex = version.metrics["test_fairness/sex/dp_diff"]

    text = model_card(card_workspace, CARD_MODEL)

    assert f"| test | sex | dp_diff | {dp_sex:.4f} |" in text
    assert "Fairness: not measured" not in text


def test_without_fairness_metrics_the_card_says_so(card_workspace: Workspace) -> None:
    facts = gather(card_workspace, get_model_version(card_workspace, CARD_MODEL))

    text = str(build_card(dataclasses.replace(facts, fairness=[])))

    assert "Fairness: not measured (the run recorded no `fairness/` metrics)." in text


def test_notes_are_model_version_tags_audited_and_shown(card_workspace: Workspace) -> None:
    notes = set_card_notes(card_workspace, CARD_MODEL, "Census income research.", None)
    set_card_notes(card_workspace, CARD_MODEL, None, "Not for credit or hiring decisions.")

    assert notes == {"ref": CARD_MODEL, "intended_use": "Census income research.",
                     "limitations": None}  # fmt: skip
    tags = open_client(card_workspace).get_model_version("adult-mlp", "1").tags
    assert tags[NOTE_TAGS["intended_use"]] == "Census income research."
    assert tags[NOTE_TAGS["limitations"]] == "Not for credit or hiring decisions."
    with card_workspace.store.session() as session:
        query = select(AuditEvent).where(AuditEvent.action == "model.card")
        events = [(e.actor, e.object_ref, e.payload) for e in session.scalars(query)]
    assert events == [
        ("tester", CARD_MODEL, {"fields": ["intended_use"]}),
        ("tester", CARD_MODEL, {"fields": ["limitations"]}),
    ]
    text = model_card(card_workspace, CARD_MODEL)
    assert "## Intended use\n\nCensus income research.\n" in text
    assert "## Limitations\n\nNot for credit or hiring decisions.\n" in text
    assert "- Known limitations: see Limitations." in text


def test_html_escapes_markup_written_in_a_note(card_workspace: Workspace) -> None:
    set_card_notes(card_workspace, CARD_MODEL, XSS, XSS)

    page = model_card(card_workspace, CARD_MODEL, "html")

    assert page.startswith("<!doctype html>")
    assert "<script" not in page and "<img" not in page and 'href="javascript' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<h2>Intended use</h2>" in page
    assert "<td>sex</td>\n<td>Female</td>" in page  # the slice tables render as tables


def test_fairness_metrics_render_as_a_table() -> None:
    recorded = {"fairness/sex/dp_diff": 0.125, "test_fairness/race/eo_diff": 0.25, "loss": 0.5}

    overall, _, fairness = split_metrics(recorded, "validation")

    assert overall == [Metric("validation", "loss", 0.5)]
    assert fairness == [
        Metric("validation", "dp_diff", 0.125, "sex"),
        Metric("test", "eo_diff", 0.25, "race"),
    ]


def test_a_card_shows_fairness_and_a_run_outside_a_job(card_workspace: Workspace) -> None:
    facts = gather(card_workspace, get_model_version(card_workspace, CARD_MODEL))
    fairness = [Metric("test", "dp_diff", 0.125, "sex")]

    text = str(build_card(dataclasses.replace(facts, fairness=fairness, compute=None)))

    assert "| split | column | measure | value |\n| --- | --- | --- | --- |" in text
    assert "| test | sex | dp_diff | 0.1250 |" in text
    assert "Compute and cost: not recorded (the run was not a scheduler job)." in text
    assert "- Fairness measured: see Fairness." in text
    assert "<td>dp_diff</td>" in card_html(
        build_card(dataclasses.replace(facts, fairness=fairness))
    )


def test_a_table_cell_cannot_break_the_table() -> None:
    assert table(["a", "b"], [("x|y", "line\nbreak")]) == (
        "| a | b |\n| --- | --- |\n| x\\|y | line break |"
    )


@pytest.mark.parametrize(
    ("call", "error", "sentence"),
    [
        (lambda w: model_card(w, "nosuch@v1"), NotFoundError, "Model 'nosuch' is not registered"),
        (lambda w: model_card(w, "adult-mlp@v9"), NotFoundError, "has no version v9"),
        (lambda w: model_card(w, CARD_MODEL, "pdf"), UsageError, "Unknown card format 'pdf'"),
        (lambda w: set_card_notes(w, CARD_MODEL, "  ", None), UsageError, "is empty"),
        (lambda w: set_card_notes(w, CARD_MODEL, "a\x00b", None), UsageError, "NUL character"),
        (
            lambda w: set_card_notes(w, CARD_MODEL, None, "x" * (MAX_NOTE_CHARS + 1)),
            UsageError,
            f"the most a model version keeps is {MAX_NOTE_CHARS}",
        ),
    ],
)
def test_bad_input_is_one_sentence(
    card_workspace: Workspace, call: object, error: type[Exception], sentence: str
) -> None:
    with pytest.raises(error, match=sentence.replace("(", r"\(")):
        call(card_workspace)  # type: ignore[operator]


def test_monitoring_cites_the_deployments_that_serve_the_version(
    card_workspace: Workspace,
) -> None:
    from forgeml.core.ids import new_id
    from forgeml.core.store import DeploymentRecord
    from forgeml.serve.deployments import DeploymentSpec

    spec = DeploymentSpec(model=CARD_MODEL, model_ref="adult-mlp", latency_objective_ms=50.0,
                          log_sample_rate=0.25)  # fmt: skip
    recorded = spec.model_dump(mode="json")
    with card_workspace.store.session() as session:
        for name, status in (("adult-web", "ready"), ("adult-old", "deleted")):
            session.add(DeploymentRecord(id=new_id(), name=name, status=status, revision=1,
                                         spec=recorded, created_by="tester"))  # fmt: skip

    annex = model_card(card_workspace, CARD_MODEL).split("### 3. Monitoring", 1)[1]

    assert annex.split("###", 1)[0].strip() == (
        ", functioning and control\n\n- Served by deployment `adult-web` (primary, ready); "
        "p99 latency objective: 50.0 ms; requests logged for drift and feedback: 25%."
    )

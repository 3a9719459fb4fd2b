"""Model cards: a registered version described from its records, in Hugging Face's format.

The card is Markdown with YAML front matter (license, datasets, metrics, base_model and a
`model-index` of results), built with huggingface_hub's `ModelCard` / `ModelCardData` /
`EvalResult` so the Hub and its tools read it (https://huggingface.co/docs/hub/model-cards).
Its sections cite the records (`_card_facts.gather`): intended use and limitations as the
owner wrote them on the version, training data with its lineage, metrics overall and per
slice, fairness measures, the scheduler job's compute and cost, and the headings of the EU
AI Act's Annex IV those records can fill. HTML is the same Markdown rendered by
markdown-it-py with raw HTML off (so a note cannot inject markup), in a Jinja2 page with
autoescape on.

Through the API the card names only records of projects its caller may read (`may_read`,
the lineage's check): a record of another project is written "in another project" and
named by no ref, digest or file. The local CLI's card (no `may_read`) shows every record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from forgeml.core.errors import UsageError
from forgeml.core.workspace import Workspace
from forgeml.governance._card_facts import CardFacts, Compute, Metric, SliceRow, gather
from forgeml.governance.lineage_refs import HIDDEN_LABEL, ReadCheck

if TYPE_CHECKING:
    from huggingface_hub import ModelCard

CardFormat = Literal["md", "html"]
CARD_FORMATS: tuple[str, ...] = get_args(CardFormat)
NOT_RECORDED = "not recorded"
TEMPLATES = Path(__file__).parent / "templates"


def model_card(
    workspace: Workspace, ref: str, card_format: str = "md", *, may_read: ReadCheck | None = None
) -> str:
    """The card of model version `ref` (`NAME`, `NAME@vN`, `NAME@ALIAS`) as Markdown or HTML;
    `may_read(kind, project)`: whether the caller may read a record there (None: every
    record; one it may not read is named by nothing of its own).

    Raises:
        UsageError: an unknown format or a malformed reference.
        NotFoundError: no such model version.
    """
    from forgeml.tracking import get_model_version

    check_format(card_format)
    card = build_card(gather(workspace, get_model_version(workspace, ref), may_read))
    return card_html(card) if card_format == "html" else str(card)


def card_summary(
    workspace: Workspace, ref: str, card_format: str = "md", *, may_read: ReadCheck | None = None
) -> dict[str, Any]:
    """What `models card --json` prints and the API answers: the ref, format and card
    (`may_read` as `model_card`'s)."""
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, ref)
    card = model_card(workspace, record.ref, card_format, may_read=may_read)
    return {"ref": record.ref, "format": card_format, "card": card}


def set_card_notes(
    workspace: Workspace, ref: str, intended_use: str | None, limitations: str | None
) -> dict[str, Any]:
    """Write the version's intended use and/or limitations (audited); return all its notes."""
    from forgeml.tracking import get_model_version
    from forgeml.tracking.card_notes import set_version_notes

    record = get_model_version(workspace, ref)
    notes = {"intended_use": intended_use, "limitations": limitations}
    return {"ref": record.ref, **set_version_notes(workspace, record, notes)}


def check_format(card_format: str) -> None:
    if card_format not in CARD_FORMATS:
        raise UsageError(f"Unknown card format '{card_format}': use md or html.")


def build_card(facts: CardFacts) -> ModelCard:
    """The Hugging Face `ModelCard` of `facts`: front matter and the sections."""
    from huggingface_hub import ModelCard

    return ModelCard.from_template(
        card_data(facts),
        template_path=str(TEMPLATES / "model_card.md.j2"),
        **_sections(facts),
    )


def card_data(facts: CardFacts) -> Any:
    """The front matter: nothing records a licence, so `unknown` (the Hub's own word)."""
    from huggingface_hub import EvalResult, ModelCardData

    dataset = facts.dataset[0].ref if facts.dataset and not facts.dataset[0].hidden else None
    task = _pipeline_tag(facts)
    results = [
        EvalResult(task_type=task, dataset_type=dataset.partition("@")[0], dataset_name=dataset,
                   dataset_split=m.split, metric_type=m.name, metric_value=round(m.value, 6))
        for m in facts.metrics if dataset and m.name != "count"
    ]  # fmt: skip
    base = facts.parent.removeprefix("hf:") if facts.parent else None
    return ModelCardData(
        model_name=facts.ref,
        license="unknown",
        library_name="forgeml",
        tags=["forgeml", str(facts.config.get("model", {}).get("name", "model"))],
        datasets=[dataset] if dataset else None,
        metrics=sorted({m.name for m in facts.metrics}) or None,
        base_model=base,
        eval_results=results or None,
    )


def _pipeline_tag(facts: CardFacts) -> str:
    data = facts.config.get("data", {})
    if data.get("text_column") and data.get("target") is None:
        return "text-generation"
    if data.get("text_column"):
        return "text-classification"
    return "tabular-classification" if facts.config.get("model") else "other"


def _sections(facts: CardFacts) -> dict[str, Any]:
    notes = facts.notes
    eval_split = str(facts.config.get("data", {}).get("eval_split") or "validation")
    return {
        "ref": facts.ref,
        "summary": _summary(facts),
        "intended_use": notes.get("intended_use") or NOT_RECORDED,
        "limitations": notes.get("limitations") or NOT_RECORDED,
        "data_summary": _data_summary(facts),
        "data_table": _data_table(facts),
        "eval_split": eval_split,
        "metrics_table": _metrics_table(facts.metrics) or "No metrics recorded.",
        "slice_tables": _slice_tables(facts.slices),
        "fairness": _fairness(facts.fairness),
        "compute": _compute(facts.compute, facts.run_seconds),
        "annex": _annex(facts),
    }


def _summary(facts: CardFacts) -> str:
    model = facts.config.get("model", {})
    family = f"a model of family `{model['name']}`" if model.get("name") else "a model"
    dataset = f" on {facts.dataset[0].named}" if facts.dataset else ""
    aliases = f" Aliases: {', '.join('@' + a for a in facts.aliases)}." if facts.aliases else ""
    return (
        f"`{facts.ref}` is {family} trained by run `{facts.run_id}`{dataset}, registered "
        f"{facts.created_at} by {facts.created_by}; bundle digest `{facts.digest}`.{aliases}"
    )


def _data_summary(facts: CardFacts) -> str:
    if not facts.dataset:
        return f"Training data: {NOT_RECORDED} (the run names no dataset version)."
    data = facts.config.get("data", {})
    first = facts.dataset[0]
    rows = "" if first.hidden else f" ({first.rows} rows)"
    lines = [f"Trained on {first.named}{rows}"
             + (f", target column `{data['target']}`." if data.get("target") else ".")]  # fmt: skip
    if facts.dataset[-1].hidden:
        lines.append(f"Source: a dataset version {HIDDEN_LABEL}.")
    elif facts.source:
        lines.append(f"Source: `{facts.source}` (SHA-256 `{facts.source_digest}`).")
    if data.get("feature_spec"):
        lines.append(f"Features: the feature spec `{data['feature_spec']}`.")
    lines.append("Lineage, from the training version back to the ingested source:")
    return "\n".join(lines)


def _data_table(facts: CardFacts) -> str:
    rows = [
        (f"*{HIDDEN_LABEL}*", "", "", "") if s.hidden
        else (f"`{s.ref}`", s.op, str(s.rows), f"`{s.digest}`")
        for s in facts.dataset
    ]  # fmt: skip
    return table(["version", "made by", "rows", "digest"], rows) if rows else ""


def _metrics_table(metrics: Sequence[Metric]) -> str:
    splits = sorted({m.split for m in metrics})
    values = {(m.name, m.split): m.value for m in metrics}
    names = sorted({m.name for m in metrics})
    rows = [(n, *(_number(values.get((n, s))) for s in splits)) for n in names]
    return table(["metric", *splits], rows) if rows else ""


def _slice_tables(slices: Sequence[SliceRow]) -> str:
    if not slices:
        return "No slices recorded (name columns under `data.slices` in the training config)."
    parts = []
    for split in sorted({row.split for row in slices}):
        chosen = [row for row in slices if row.split == split]
        names = sorted({n for row in chosen for n in row.metrics if n != "count"})
        rows = [(r.column, r.value, _number(r.metrics.get("count"), 0),
                 *(_number(r.metrics.get(n)) for n in names)) for r in chosen]  # fmt: skip
        parts.append(f"Split `{split}`:\n\n" + table(["column", "value", "rows", *names], rows))
    return "\n\n".join(parts)


def _fairness(measures: Sequence[Metric]) -> str:
    if not measures:
        return "Fairness: not measured (the run recorded no `fairness/` metrics)."
    rows = [(m.split, m.column or "-", m.name, _number(m.value)) for m in measures]
    return table(["split", "column", "measure", "value"], rows)


def _compute(compute: Compute | None, run_seconds: float | None) -> str:
    duration = f"The run took {run_seconds:.1f} s. " if run_seconds is not None else ""
    if compute is None:
        return f"{duration}Compute and cost: {NOT_RECORDED} (the run was not a scheduler job)."
    energy = compute.gpu_energy_joules
    rows = [
        ("job", f"`{compute.job_name}` (`{compute.job_id}`)"),
        ("attempts", str(compute.attempts)),
        ("wall time (s)", f"{compute.wall_seconds:.1f}"),
        ("CPU time (core-seconds)", f"{compute.cpu_seconds:.1f}"),
        ("GPU time (GPU-seconds)", f"{compute.gpu_seconds:.1f}"),
        ("peak memory (GB)", f"{compute.peak_memory_gb:.2f}"),
        ("GPU energy (J)", NOT_RECORDED if energy is None else f"{energy:.0f}"),
        (f"cost ({compute.currency})", f"{compute.cost:.4f}"),
    ]
    return (
        duration
        + "Measured by the scheduler, summed over the job's attempts:\n\n"
        + table(["figure", "value"], rows)
    )


def _annex(facts: CardFacts) -> dict[str, str]:
    from forgeml.governance._annex import annex_iv

    return annex_iv(facts)


def card_html(card: ModelCard) -> str:
    """`card` as a standalone HTML page: its Markdown rendered with raw HTML disabled."""
    from jinja2 import Environment, FileSystemLoader
    from markdown_it import MarkdownIt
    from markupsafe import Markup

    # commonmark with html off: `<script>` in a note is text, never markup
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(card.text)
    environment = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
    page = environment.get_template("model_card.html.j2")
    ref = getattr(card.data, "model_name", None) or "model"
    return page.render(ref=ref, front_matter=card.data.to_yaml(), body=Markup(body))


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown (GFM) table; a `|` or line break inside a cell cannot end it."""
    lines = [_row(headers), _row(["---"] * len(headers))]
    lines += [_row(row) for row in rows]
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    cleaned = (str(c).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") for c in cells)
    return "| " + " | ".join(cleaned) + " |"


def _number(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"

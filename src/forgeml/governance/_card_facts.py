"""The records a model card is written from, gathered once into plain data.

Everything here is read, never inferred: the version's lineage row and metrics, its run's
config and tags, the dataset version chain down to the ingested source, the scheduler
job's measured attempts and their price, and the notes the owner wrote on the version.

Records belong to projects. Given `may_read(kind, project)` (the API's authorizer, as for
lineage), a record of a project the caller may not read is named by no ref, digest, file
or setting: a dataset version of the chain becomes one hidden step and the chain stops
there (its parents and source unread), a deployment serving the version a hidden one, a
parent model of the workspace a hidden parent. Without `may_read` (the local CLI) every
record is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from forgeml.core.store import DatasetVersion, ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.governance.lineage_refs import HIDDEN_LABEL, ReadCheck, RefKind

FAIRNESS_PREFIX = "fairness/"
GIT_COMMIT_TAG = "mlflow.source.git.commit"
TEST_PREFIX = "test_"  # the recorder's prefix for the test split's metrics


@dataclass(frozen=True)
class DatasetStep:
    """One version in the chain that made the training data (`op`: ingest, clean, ...);
    a `hidden` one, of a project the caller may not read, names nothing (the chain's last)."""

    ref: str
    op: str
    digest: str
    rows: int
    hidden: bool = False

    @property
    def named(self) -> str:
        """How a card names the version: its ref, or that it is of another project."""
        return f"a dataset version {HIDDEN_LABEL}" if self.hidden else f"`{self.ref}`"


@dataclass(frozen=True)
class Metric:
    """One figure on one split (`column`: the data column a fairness measure is about)."""

    split: str
    name: str
    value: float
    column: str | None = None


@dataclass(frozen=True)
class SliceRow:
    """A model's metrics on the `split` rows where `column` is `value`."""

    split: str
    column: str
    value: str
    metrics: dict[str, float]


@dataclass(frozen=True)
class Compute:
    """A scheduler job's measured use summed over its attempts, and its price."""

    job_id: str
    job_name: str
    attempts: int
    wall_seconds: float
    cpu_seconds: float
    gpu_seconds: float
    peak_memory_gb: float
    gpu_energy_joules: float | None
    cost: float
    currency: str


@dataclass(frozen=True)
class Serving:
    """A deployment that serves the version, and what it watches."""

    deployment: str
    status: str
    role: str  # primary, canary or shadow
    latency_objective_ms: float | None
    log_sample_rate: float | None
    hidden: bool = False  # of a project the caller may not read: nothing above is its own


@dataclass(frozen=True)
class CardFacts:
    """What a card says about one model version, every figure from a record."""

    ref: str
    name: str
    version: int
    created_at: str
    created_by: str
    digest: str
    parent: str | None
    run_id: str
    run_seconds: float | None
    config: dict[str, Any]
    code_version: str | None
    dataset: list[DatasetStep]  # the training version first, its source's ingest last
    source: str | None
    source_digest: str | None
    metrics: list[Metric]
    slices: list[SliceRow]
    fairness: list[Metric]
    notes: dict[str, str | None]
    compute: Compute | None
    aliases: list[str] = field(default_factory=list)
    serving: list[Serving] = field(default_factory=list)
    parent_hidden: bool = False  # `parent` is None: a model of a project the caller may not read


HIDDEN_STEP = DatasetStep("", "", "", 0, hidden=True)


def gather(
    workspace: Workspace, record: ModelVersionRecord, may_read: ReadCheck | None = None
) -> CardFacts:
    """Read every record the card of `record` cites; `may_read`: whether the caller may
    read a record of a kind in a project (None: every record)."""
    from forgeml.tracking import model_aliases
    from forgeml.tracking.card_notes import run_tags, version_notes
    from forgeml.tracking.runs import JOB_TAG

    def visible(kind: RefKind, project: str) -> bool:
        return may_read is None or may_read(kind, project)

    run = record.run
    tags = run_tags(workspace, run.id)
    chain, source = _chain(workspace, record.dataset_version_id, visible)
    parent = _parent(workspace, record.parent, visible)
    config = run.config or {}
    eval_split = str(config.get("data", {}).get("eval_split") or "validation")
    metrics, slices, fairness = split_metrics(record.metrics or {}, eval_split)
    seconds = (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
    aliases = model_aliases(workspace, record.name)
    return CardFacts(
        ref=record.ref,
        name=record.name,
        version=record.version,
        created_at=record.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        created_by=record.created_by,
        digest=record.artifact_digest,
        parent=parent,
        run_id=run.id,
        run_seconds=seconds,
        config=config,
        code_version=tags.get(GIT_COMMIT_TAG),
        dataset=chain,
        source=source.get("source"),
        source_digest=source.get("source_digest"),
        metrics=metrics,
        slices=slices,
        fairness=fairness,
        notes=version_notes(workspace, record),
        compute=_compute(workspace, tags.get(JOB_TAG)),
        aliases=sorted(a for a, v in aliases.items() if v == record.version),
        serving=_serving(workspace, record.ref, visible),
        parent_hidden=record.parent is not None and parent is None,
    )


Visible = Callable[[RefKind, str], bool]


def _chain(
    workspace: Workspace, version_id: str | None, visible: Visible
) -> tuple[list[DatasetStep], dict[str, Any]]:
    """The version and its first parents down to the ingested one, read in one session,
    and the ingest's recipe parameters (its source); a version the caller may not read is
    the hidden last step, and then the source is unread (empty)."""
    chain: list[DatasetStep] = []
    source: dict[str, Any] = {}
    with workspace.store.session() as session:
        version = session.get(DatasetVersion, version_id) if version_id else None
        while version is not None and len(chain) < 100:  # a bound; lineage has no cycles
            if not visible("dataset", version.dataset.project):
                return [*chain, HIDDEN_STEP], {}
            chain.append(DatasetStep(version.ref, str(version.recipe.get("op")),
                                     version.digest, version.rows))  # fmt: skip
            source = version.recipe.get("params", {})
            version = version.parent_edges[0].parent if version.parent_edges else None
    return chain, source


def _parent(workspace: Workspace, parent: str | None, visible: Visible) -> str | None:
    """`parent` unless it is a model version of a project the caller may not read (an
    external parent, `hf:...`, is no record of the workspace: always shown)."""
    from sqlalchemy import select

    if parent is None or ":" in parent:
        return parent
    query = select(ModelVersionRecord.project).where(
        ModelVersionRecord.name == parent.partition("@")[0]
    )
    with workspace.store.session() as session:
        project = session.scalar(query.limit(1))
    return parent if project is None or visible("model", project) else None


def split_metrics(
    metrics: dict[str, Any], eval_split: str
) -> tuple[list[Metric], list[SliceRow], list[Metric]]:
    """A run's final metrics sorted into overall ones, per-slice rows and fairness ones.

    The recorder names them `accuracy` (the eval split), `test_accuracy` (the test split),
    `accuracy/sex=Female` (a slice) and `fairness/sex/dp_diff` (a fairness measure).
    """
    overall: list[Metric] = []
    slices: dict[tuple[str, str, str], dict[str, float]] = {}
    fairness: list[Metric] = []
    for key, value in sorted(metrics.items()):
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        split, name = _split_of(key, eval_split)
        if name.startswith(FAIRNESS_PREFIX):
            column, _, measure = name.removeprefix(FAIRNESS_PREFIX).rpartition("/")
            fairness.append(Metric(split, measure, float(value), column or None))
        elif "/" not in name:
            overall.append(Metric(split, name, float(value)))
        elif "=" in (where := name.rpartition("/")[2]):
            column, _, level = where.partition("=")
            slices.setdefault((split, column, level), {})[name.rpartition("/")[0]] = float(value)
    rows = [SliceRow(*where, values) for where, values in sorted(slices.items())]
    return overall, rows, fairness


def _serving(workspace: Workspace, ref: str, visible: Visible) -> list[Serving]:
    """The live deployments whose replicas run `ref`, by name (one the caller may not read
    hidden, after them)."""
    from sqlalchemy import select

    from forgeml.core.store import DeploymentRecord
    from forgeml.serve.deployments import DeploymentSpec

    found, hidden = [], []
    query = select(DeploymentRecord).where(DeploymentRecord.status != "deleted")
    with workspace.store.session() as session:
        for record in session.scalars(query.order_by(DeploymentRecord.name)):
            spec = DeploymentSpec.model_validate(record.spec)
            roles = list(dict.fromkeys(role for role, model in spec.plan() if model == ref))
            if roles and not visible("deployment", record.project):
                hidden.append(Serving("", "", "", None, None, hidden=True))
                continue
            for role in roles:
                found.append(Serving(record.name, record.status, role,
                                     spec.latency_objective_ms, spec.log_sample_rate))  # fmt: skip
    return found + hidden


def _split_of(key: str, eval_split: str) -> tuple[str, str]:
    if key.startswith(TEST_PREFIX):
        return "test", key.removeprefix(TEST_PREFIX)
    return eval_split, key


def _compute(workspace: Workspace, job_id: str | None) -> Compute | None:
    from forgeml.core.store import JobRecord
    from forgeml.scheduler.cost import load_price_table
    from forgeml.scheduler.jobs import attempts_of

    if not job_id:
        return None
    with workspace.store.session() as session:
        job = session.get(JobRecord, job_id)
        if job is None:
            return None
        attempts = attempts_of(session, job_id)
        energy = [a.gpu_energy_joules for a in attempts if a.gpu_energy_joules is not None]
        return Compute(
            job_id=job.id,
            job_name=job.name,
            attempts=len(attempts),
            wall_seconds=sum(a.wall_seconds for a in attempts),
            cpu_seconds=sum(a.cpu_seconds for a in attempts),
            gpu_seconds=sum(a.gpu_seconds for a in attempts),
            peak_memory_gb=max((a.peak_memory_gb for a in attempts), default=0.0),
            gpu_energy_joules=sum(energy) if energy else None,
            cost=sum(a.cost for a in attempts),
            currency=load_price_table(workspace.settings).currency,
        )

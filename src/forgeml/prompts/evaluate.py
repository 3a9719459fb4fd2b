"""`prompts eval`: two or more prompt versions over the same rows, scored, recorded as a run.

Each version renders each row (the row's columns named like its declared variables), the
rendered prompt goes to the language model through a `ChatModel`, and the metric scores
the reply (the `judge` metric asks a language model). The run's params name every
prompt@version, its metrics hold each version's mean score (`NAME.vN.METRIC`), and
`prompt_eval.json` holds every row's output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import MissingColumnError, UsageError
from forgeml.prompts.registry import PromptVersion, get_prompt
from forgeml.prompts.scoring import Metric, judge
from forgeml.prompts.spec import Rendered

if TYPE_CHECKING:
    from forgeml.core.store import DatasetVersion
    from forgeml.core.workspace import Workspace
    from forgeml.prompts.client import ChatModel

EVAL_ARTIFACT = "prompt_eval.json"
RUN_NAME = "prompt-eval"


@dataclass
class VersionScore:
    """One version's mean score and its rows (variables, output, expected, score)."""

    ref: str
    digest: str
    score: float
    rows: list[dict[str, Any]] = field(default_factory=list)

    def metric_key(self, metric: Metric) -> str:
        name, _, number = self.ref.partition("@")
        return f"{name}.{number}.{metric.name}"


@dataclass
class EvalResult:
    """What `evaluate_prompts` recorded: the run and each version's score."""

    run_id: str
    metric: str
    versions: list[VersionScore]

    def metrics(self, metric: Metric) -> dict[str, float]:
        return {version.metric_key(metric): version.score for version in self.versions}


def evaluate_prompts(
    workspace: Workspace,
    refs: Sequence[str],
    rows: list[dict[str, Any]],
    metric: Metric,
    model: ChatModel,
    *,
    expected_column: str | None = None,
    dataset: DatasetVersion | None = None,
    data_label: str = "",
    max_tokens: int = 64,
    judge_model: ChatModel | None = None,
) -> EvalResult:
    """Score each version in `refs` over `rows` and record the result as a tracked run.

    Args:
        workspace: where the prompts are and the run is recorded.
        refs: two or more prompt references.
        rows: the inputs; each holds the variables (and the expected column).
        metric: how a reply is scored.
        model: the language model (e.g. a `ChatClient`).
        expected_column: the column holding the expected answer (exact, contains).
        dataset: the dataset version the rows came from, logged as the run's input.
        data_label: where the rows came from, for the run's params.
        max_tokens: the longest reply, unless a prompt's model defaults say otherwise.
        judge_model: the judge for the `judge` metric; default `model` itself.

    Raises:
        UsageError: fewer than two versions, or no expected column where one is needed.
        MissingColumnError: a row lacks the expected column.
        GeneratorError: the language model failed (the run is recorded FAILED).
    """
    from forgeml.tracking import log_json_artifact, start_run
    from forgeml.tracking.lifecycle import tracked_run

    versions = [get_prompt(workspace, ref) for ref in refs]
    if len({version.ref for version in versions}) < 2:
        raise UsageError("prompts eval compares two or more different prompt versions.")
    if metric.needs_expected and expected_column is None:
        raise UsageError(f"The {metric.name} metric needs --expected-column.")
    if expected_column is not None:
        for number, row in enumerate(rows, 1):
            if expected_column not in row:
                raise MissingColumnError(f"Row {number} has no column '{expected_column}'.")
    config = {
        "prompts": {f"prompt_{n}": version.ref for n, version in enumerate(versions, 1)},
        "metric": metric.name if metric.pattern is None else f"regex:{metric.pattern.pattern}",
        "data": data_label,
        "rows": len(rows),
        "model": getattr(model, "model", type(model).__name__),
    }
    if metric.name == "judge":
        config["judge"] = getattr(judge_model or model, "model", "")
    handle = start_run(workspace, config, RUN_NAME, dataset)
    with tracked_run(handle) as run:
        scores = [
            _score_version(version, rows, metric, model, expected_column, max_tokens, judge_model)
            for version in versions
        ]
        result = EvalResult(handle.run_id, str(config["metric"]), scores)
        log_json_artifact(handle, _artifact(result), EVAL_ARTIFACT)
        run.finish(result.metrics(metric))
    return result


def _score_version(
    version: PromptVersion,
    rows: list[dict[str, Any]],
    metric: Metric,
    model: ChatModel,
    expected_column: str | None,
    max_tokens: int,
    judge_model: ChatModel | None,
) -> VersionScore:
    prompt = version.checked()
    declared = [variable.name for variable in version.spec.variables]
    defaults = version.spec.model
    scored: list[dict[str, Any]] = []
    for row in rows:
        values = {name: row[name] for name in declared if name in row}
        messages = _as_messages(prompt.render(values, version.ref))
        reply = model.chat(
            messages,
            temperature=defaults.temperature or 0.0,
            max_tokens=defaults.max_tokens or max_tokens,
            prompt=version.ref,
        )
        output = reply.content or ""
        expected = row.get(expected_column) if expected_column else None
        result = {"variables": values, "output": output, "expected": expected}
        if metric.name == "judge":
            result["score"], result["judgement"] = judge(judge_model or model, output, expected)
        else:
            result["score"] = metric.score(output, expected)
        scored.append(result)
    mean = sum(float(row["score"]) for row in scored) / len(scored) if scored else 0.0
    return VersionScore(version.ref, version.record.digest, mean, scored)


def _as_messages(rendered: Rendered) -> list[dict[str, Any]]:
    if isinstance(rendered, str):
        return [{"role": "user", "content": rendered}]
    return list(rendered)


def _artifact(result: EvalResult) -> dict[str, Any]:
    return {
        "metric": result.metric,
        "versions": [
            {"ref": v.ref, "digest": v.digest, "score": v.score, "rows": v.rows}
            for v in result.versions
        ],
    }

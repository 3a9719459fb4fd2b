"""`prompts eval` for real: a byte-level GPT served on forgeml's OpenAI routes, reached
through `ChatClient` over HTTP, and the run read back from MLflow and the store."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi import FastAPI

from forgeml.core.config import Settings
from forgeml.core.errors import GeneratorError, NotFoundError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.prompts import ChatClient, create_prompt, evaluate_prompts, parse_metric
from forgeml.serve.generate import TextGenerator
from forgeml.serve.protocols.openai import Generated, router
from forgeml.tracking import get_run, open_client
from forgeml.train.models.tiny_gpt import TinyGPT
from tests.prompts.conftest import chat_spec, text_spec
from tests.serve._text_models import one_torch_thread  # noqa: F401  (an autouse fixture)
from tests.serve.test_openai import serve_in_thread
from tests.train.conftest import copy_empty_home

LM = "tiny-gpt"
ROWS = [
    {"question": "What is the capital of France?", "answer": "Paris"},
    {"question": "Say something.", "answer": " "},
    {"question": "Spell a letter.", "answer": "e"},
]


class TinyLM:
    """`OpenAIModels` over one small byte-level GPT (seeded weights: the same every run)."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        module = TinyGPT(block_size=256, n_layer=1, n_head=2, n_embd=32)
        self.gpt = TextGenerator.from_module(module, block_size=256)

    def names(self) -> list[str]:
        return [LM]

    async def embed(self, name: str, texts: list[str]) -> list[list[float]]:
        raise UsageError(f"Model '{name}' is a language model, not a text encoder.")

    def generator(self, name: str) -> TextGenerator:
        if name != LM:
            raise NotFoundError(f"The model '{name}' does not exist on this server.")
        return self.gpt


@pytest.fixture(scope="module")
def generated() -> list[Generated]:
    """What the served LM's routes recorded (as a server's request log is offered it)."""
    return []


@pytest.fixture(scope="module")
def lm_url(generated: list[Generated]) -> Iterator[str]:
    app = FastAPI()
    app.include_router(router(TinyLM(), record=generated.append))
    for base in serve_in_thread(app):
        yield f"{base}/v1"


@pytest.fixture
def workspace(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A workspace whose MLflow store is migrated already (a copy: seconds faster)."""
    home = copy_empty_home(tmp_path_factory, tmp_path / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    yield workspace
    workspace.close()


@pytest.fixture
def two_versions(workspace: Workspace) -> list[str]:
    create_prompt(workspace, "qa", text_spec("Q: {{ question }}\nA:"))
    create_prompt(workspace, "qa", chat_spec("Answer in {{ words }} words."))
    return ["qa@v1", "qa@v2"]


def test_eval_records_a_run_whose_metrics_are_the_scores_of_its_outputs(
    workspace: Workspace, two_versions: list[str], lm_url: str
) -> None:
    metric = parse_metric("contains")
    client = ChatClient(lm_url, LM, max_retries=0)

    result = evaluate_prompts(
        workspace, two_versions, ROWS, metric, client, expected_column="answer", max_tokens=12
    )

    run = get_run(workspace, result.run_id)
    recorded = recorded_eval(workspace, result.run_id)
    rescored = {
        "qa.v{}.contains".format(version["ref"][-1]): sum(
            metric.score(row["output"], row["expected"]) for row in version["rows"]
        )
        / len(ROWS)
        for version in recorded["versions"]
    }
    assert run.status == "FINISHED"
    assert run.metrics == rescored == result.metrics(metric)
    assert set(rescored) == {"qa.v1.contains", "qa.v2.contains"}
    assert [v["ref"] for v in recorded["versions"]] == two_versions
    params = open_client(workspace).get_run(result.run_id).data.params
    assert (params["prompts.prompt_1"], params["prompts.prompt_2"]) == ("qa@v1", "qa@v2")
    assert params["metric"] == "contains"


def test_each_recorded_output_is_what_the_model_answers_to_the_rendered_prompt(
    workspace: Workspace, two_versions: list[str], lm_url: str
) -> None:
    client = ChatClient(lm_url, LM, max_retries=0)
    result = evaluate_prompts(
        workspace, two_versions, ROWS[:1], parse_metric("json"), client, max_tokens=12
    )

    question = ROWS[0]["question"]
    text_reply = client.chat([{"role": "user", "content": f"Q: {question}\nA:"}], max_tokens=12)
    chat_reply = client.chat(
        [
            {"role": "system", "content": "Answer in 3 words."},
            {"role": "user", "content": question},
        ],
        max_tokens=12,
    )
    outputs = [version.rows[0]["output"] for version in result.versions]
    assert outputs == [text_reply.content, chat_reply.content]
    assert [version.rows[0]["variables"] for version in result.versions] == [
        {"question": question},
        {"question": question},
    ]


def test_every_generation_of_an_eval_carries_its_prompt_version_to_the_server(
    workspace: Workspace, two_versions: list[str], lm_url: str, generated: list[Generated]
) -> None:
    generated.clear()
    client = ChatClient(lm_url, LM, max_retries=0)

    evaluate_prompts(workspace, two_versions, ROWS[:2], parse_metric("json"), client, max_tokens=4)

    assert [g.prompt for g in generated] == ["qa@v1", "qa@v1", "qa@v2", "qa@v2"]
    assert generated[2].instances == [
        [
            {"role": "system", "content": "Answer in 3 words."},
            {"role": "user", "content": ROWS[0]["question"]},
        ]
    ]


def test_the_judge_scores_each_row_by_its_recorded_judgement(
    workspace: Workspace, two_versions: list[str], lm_url: str
) -> None:
    metric = parse_metric("judge")
    client = ChatClient(lm_url, LM, max_retries=0)

    result = evaluate_prompts(
        workspace, two_versions, ROWS[:2], metric, client, expected_column="answer", max_tokens=8
    )

    recorded = recorded_eval(workspace, result.run_id)
    rows = [row for version in recorded["versions"] for row in version["rows"]]
    assert all(row["score"] == float(row["judgement"].lower().startswith("yes")) for row in rows)
    assert get_run(workspace, result.run_id).metrics == {
        "qa.v{}.judge".format(v["ref"][-1]): sum(r["score"] for r in v["rows"]) / 2
        for v in recorded["versions"]
    }
    params = open_client(workspace).get_run(result.run_id).data.params
    assert (params["metric"], params["judge"]) == ("judge", LM)


def test_the_cli_evaluates_a_dataset_version_and_prints_json(
    cli: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, lm_url: str
) -> None:
    copy_empty_home(tmp_path_factory, tmp_path / "home")  # the cli's FORGEML_HOME
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    spec = tmp_path / "qa.yaml"
    spec.write_text(text_spec().model_dump_json(), encoding="utf-8")
    spec2 = tmp_path / "qa2.yaml"
    spec2.write_text(text_spec("Question: {{ question }}").model_dump_json(), encoding="utf-8")
    for path in (spec, spec2):
        assert cli("prompts", "create", "qa", "--file", path).code == 0
    assert cli("data", "add", "questions", data).code == 0

    args = ["--model-url", lm_url, "--model", LM, "--expected-column", "answer", "--json"]
    result = cli("prompts", "eval", "qa@v1", "qa@v2", "--data", "questions@v1", *args)

    assert result.code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert printed["metric"] == "exact"
    assert [(v["ref"], v["rows"]) for v in printed["versions"]] == [("qa@v1", 3), ("qa@v2", 3)]

    table = cli("prompts", "eval", "qa@v1", "qa@v2", "--data", data, *args[:-1])
    assert table.code == 0, table.stderr
    assert "qa@v1: exact" in table.stdout and "qa@v2: exact" in table.stdout
    assert "recorded as run" in table.stdout


def test_an_unreachable_model_fails_the_run_with_one_sentence(
    workspace: Workspace, two_versions: list[str]
) -> None:
    client = ChatClient("http://127.0.0.1:9/v1", LM, max_retries=0, timeout_s=5)

    with pytest.raises(GeneratorError, match="could not be reached") as raised:
        evaluate_prompts(workspace, two_versions, ROWS, parse_metric("json"), client)

    [run] = [r for r in _runs(workspace) if r.name == "prompt-eval"]
    assert run.status == "FAILED"
    assert run.error == str(raised.value)


@pytest.mark.parametrize(
    ("refs", "metric", "column", "error", "sentence"),
    [
        (["qa@v1"], "json", None, UsageError, "prompts eval compares two or more"),
        (["qa@v2", "qa"], "json", None, UsageError, "prompts eval compares two or more"),
        (["qa@v1", "qa@v2"], "exact", None, UsageError, "The exact metric needs"),
    ],
)
def test_a_bad_eval_is_refused_before_any_run(
    workspace: Workspace,
    two_versions: list[str],
    refs: list[str],
    metric: str,
    column: str | None,
    error: type[Exception],
    sentence: str,
) -> None:
    client = ChatClient("http://127.0.0.1:9/v1", LM, max_retries=0)

    with pytest.raises(error, match=sentence):
        evaluate_prompts(
            workspace, refs, ROWS, parse_metric(metric), client, expected_column=column
        )
    assert _runs(workspace) == []


def _runs(workspace: Workspace) -> list[Any]:
    from forgeml.tracking import list_runs

    return list(list_runs(workspace))


def recorded_eval(workspace: Workspace, run_id: str) -> Any:
    """The run's prompt_eval.json artifact, as MLflow stored it."""
    with tempfile.TemporaryDirectory() as scratch:
        path = open_client(workspace).download_artifacts(run_id, "prompt_eval.json", scratch)
        return json.loads(Path(path).read_text(encoding="utf-8"))

"""The Argo export: a valid Workflow whose tasks, run in its order, run the pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import assert_cli_error, json_out
from tests.pipelines.conftest import write_pipeline

pytest.importorskip("hera", reason="the Argo export needs hera (the argo extra)")

# a diamond: two branches from one step, joined by a fourth; step names Argo must rename
PIPELINE = """
name: Diamond_Demo
params:
  word: hello
steps:
  - name: make_word
    kind: command
    argv: [PYTHON, -c, "open('word.txt', 'w').write('${params.word}')"]
    outputs: {text: word.txt}
  - name: upper
    kind: command
    argv:
      - PYTHON
      - -c
      - >-
        open('upper.txt', 'w').write(open('${steps.make_word.text}').read().upper())
    outputs: {text: upper.txt}
  - name: twice
    kind: command
    argv: [PYTHON, -c, "open('twice.txt', 'w').write(open('${steps.make_word.text}').read() * 2)"]
    outputs: {text: twice.txt}
  - name: join
    kind: command
    argv:
      - PYTHON
      - -c
      - >-
        open('join.txt', 'w').write(open('${steps.upper.text}').read()
        + open('${steps.twice.text}').read())
    outputs: {text: join.txt}
"""


def _export(cli: Any, path: Path, *args: str) -> dict[str, Any]:
    result = cli("pipelines", "export", path, "--image", "registry.local/forgeml:1", *args)
    assert result.code == 0, result.stderr
    workflow: dict[str, Any] = yaml.safe_load(result.stdout)
    return workflow


def test_the_export_is_one_task_per_step_with_the_pipeline_s_dependencies(
    cli: Any, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path, PIPELINE)
    workflow = _export(cli, path, "--secret", "forgeml-store", "--namespace", "ml")

    assert (workflow["apiVersion"], workflow["kind"]) == ("argoproj.io/v1alpha1", "Workflow")
    assert workflow["metadata"] == {"generateName": "diamond-demo-", "namespace": "ml"}
    templates = {t["name"]: t for t in workflow["spec"]["templates"]}
    tasks = {task["name"]: task for task in templates["pipeline"]["dag"]["tasks"]}
    assert set(tasks) == {"make-word", "upper", "twice", "join"}  # '_' is not Argo's
    assert "depends" not in tasks["make-word"]
    assert tasks["upper"]["depends"] == tasks["twice"]["depends"] == "make-word"
    assert set(tasks["join"]["depends"].split(" && ")) == {"upper", "twice"}
    assert {t["arguments"]["parameters"][0]["value"] for t in tasks.values()} == {
        "make_word", "upper", "twice", "join"
    }  # fmt: skip
    step = templates["step"]
    assert step["container"]["args"] == [
        "pipelines", "run", "/forgeml/pipeline.yaml", "--step", "{{inputs.parameters.step}}"
    ]  # fmt: skip
    assert step["container"]["envFrom"] == [{"secretRef": {"name": "forgeml-store"}}]
    (artifact,) = step["inputs"]["artifacts"]
    assert artifact["raw"]["data"] == path.read_text()


def test_the_export_is_a_valid_argo_workflow(cli: Any, tmp_path: Path) -> None:
    from hera.workflows.models import Workflow

    path = write_pipeline(tmp_path, PIPELINE)
    exported = _export(cli, path, "--set", "params.word=bye")
    parsed = Workflow.model_validate(exported)  # Argo's own schema, as hera generates it
    assert parsed.spec.templates is not None and len(parsed.spec.templates) == 2
    assert exported["spec"]["templates"][0]["container"]["args"][-2:] == [
        "--set", "params.word=bye"
    ]  # fmt: skip


def test_running_the_tasks_in_argo_s_order_runs_each_step_once(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Argo does, here: each task in dependency order, the same command with its step."""
    path = write_pipeline(tmp_path, PIPELINE)
    workflow = _export(cli, path)
    templates = {t["name"]: t for t in workflow["spec"]["templates"]}
    tasks = templates["pipeline"]["dag"]["tasks"]
    done: list[str] = []
    while len(done) < len(tasks):
        ready = [
            t for t in tasks
            if t["name"] not in done
            and all(d in done for d in t.get("depends", "").split(" && ") if d)
        ]  # fmt: skip
        task = ready[0]
        step = task["arguments"]["parameters"][0]["value"]
        args = [
            str(path)
            if arg == "/forgeml/pipeline.yaml"
            else arg.replace("{{inputs.parameters.step}}", step)
            for arg in templates["step"]["container"]["args"]
        ]  # the file where this machine has it
        summary = json_out(cli(*args, "--json"))
        ran = {s["name"]: s["cached"] for s in summary["steps"]}
        assert ran[step] is False  # the task's own step runs in its task
        assert all(cached for name, cached in ran.items() if name != step)  # the rest: cache
        done.append(task["name"])
    assert (tmp_path / "join.txt").read_text() == "HELLOhellohello"
    runs = json_out(cli("pipelines", "list", "--json"))
    assert sorted(run["total_steps"] for run in runs) == [1, 2, 2, 4]


def test_bad_exports_and_steps_are_one_sentence(cli: Any, tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, PIPELINE)
    assert_cli_error(
        cli("pipelines", "export", path, "--image", "x", "--format", "kfp"),
        "Unknown --format 'kfp'",
        code=2,
    )
    assert_cli_error(
        cli("pipelines", "run", path, "--step", "nosuch"),
        "There is no step 'nosuch' in pipeline.yaml (its steps: make_word, upper, twice, join).",
        code=2,
    )

from __future__ import annotations

import re
from pathlib import Path

import pytest

from forgeml.core.errors import ConfigError, UsageError
from forgeml.pipelines import load_pipeline
from forgeml.pipelines.steps import CommandStep, DataStep, PromoteStep
from tests.pipelines.conftest import write_pipeline

GOOD = """
name: demo
params:
  seed: 1
steps:
  - name: ingest
    kind: data
    add: small.csv
    dataset: small
  - name: split
    kind: data
    derive: split
    dataset: ${steps.ingest.dataset}
    params:
      seed: ${params.seed}
  - name: report
    kind: command
    argv: [PYTHON, report.py, "${steps.split.dataset}"]
    outputs: {report: report.txt}
  - name: sibling
    kind: command
    argv: [PYTHON, -c, "print(1)"]
    needs: [ingest]
"""

BAD = {
    "a cycle": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo, "${steps.c.out}"], outputs: {out: a.txt}}
  - {name: b, kind: command, argv: [echo, "${steps.a.out}"], outputs: {out: b.txt}}
  - {name: c, kind: command, argv: [echo, "${steps.b.out}"], outputs: {out: c.txt}}
""",
        "the steps form a cycle: a -> c -> b -> a.",
    ),
    "a step that needs itself": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo], needs: [a]}
""",
        "the steps form a cycle: a -> a.",
    ),
    "an unknown step kind": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo]}
  - {name: b, kind: teleport, argv: [echo]}
""",
        "step 'b': key 'kind': unknown step kind 'teleport' (known: canary, command, data, "
        "deploy, evaluate, finetune, gate, optimize, promote, stream, train, tune).",
    ),
    "a reference to an unknown step": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo, "${steps.nope.out}"]}
""",
        "step 'a': key 'argv.1': ${steps.nope.out} refers to an unknown step.",
    ),
    "a reference to an unknown output": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo], outputs: {out: a.txt}}
  - {name: b, kind: data, derive: clean, dataset: "${steps.a.model}"}
""",
        "step 'b': key 'dataset': ${steps.a.model}: step 'a' has no output 'model' "
        "(its outputs: out).",
    ),
    "a reference to an unknown parameter": (
        """
name: p
params: {lr: 0.1}
steps:
  - {name: a, kind: command, argv: [echo, "${params.seed}"]}
""",
        "step 'a': key 'argv.1': ${params.seed} names no parameter (the file's params: lr).",
    ),
    "a malformed reference": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo, "${steps.a}"]}
""",
        "step 'a': key 'argv.1': '${steps.a}' is not a reference: use ${steps.NAME.OUTPUT} "
        "or ${params.NAME}.",
    ),
    "duplicate names": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo]}
  - {name: b, kind: command, argv: [echo]}
  - {name: a, kind: command, argv: [echo, again]}
""",
        "step 'a' is defined twice (steps 1 and 3).",
    ),
    "an unknown need": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo], needs: [b]}
""",
        "step 'a': key 'needs': there is no step 'b'.",
    ),
    "an unknown key of a step": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo], retry: 3}
""",
        "step 'a': unknown key 'retry'.",
    ),
    "a missing key of a step": (
        """
name: p
steps:
  - {name: a, kind: optimize, mode: onnx}
""",
        "step 'a': missing required key 'model'.",
    ),
    "a train step with neither config nor reproduce": (
        """
name: p
steps:
  - {name: a, kind: train}
""",
        "step 'a': give exactly one of `config` and `reproduce`.",
    ),
    "both derive and add": (
        """
name: p
steps:
  - {name: a, kind: data, derive: clean, add: x.csv, dataset: d}
""",
        "step 'a': give exactly one of `derive` and `add`.",
    ),
    "a reserved output name": (
        """
name: p
steps:
  - {name: a, kind: command, argv: [echo], outputs: {digests: d.txt}}
""",
        "step 'a': key 'outputs': 'digests' cannot name an output",
    ),
    "no steps": ("name: p\nsteps: []\n", "key 'steps': List should have at least 1 item"),
    "a promote step's gate that is no reference": (
        """
name: p
steps:
  - {name: a, kind: promote, model: m@v2, gate: best}
""",
        "step 'a': key 'gate': give the gate's verdict as ${steps.GATE.verdict}",
    ),
}

RELEASE = """
name: release
steps:
  - {name: check, kind: gate, challenger: m@v2, champion: m@production, metric: loss, mode: min}
  - {name: promote, kind: promote, model: "${steps.check.challenger}"}
  - {name: pinned, kind: promote, model: m@v2, alias: staging}
"""


def test_a_valid_file_infers_needs_from_references_and_orders_the_steps(tmp_path: Path) -> None:
    pipeline = load_pipeline(write_pipeline(tmp_path, GOOD))

    assert pipeline.needs == {
        "ingest": [],
        "split": ["ingest"],
        "report": ["split"],
        "sibling": ["ingest"],
    }
    assert pipeline.order == ["ingest", "split", "report", "sibling"]
    assert isinstance(pipeline.step("split"), DataStep)
    assert isinstance(pipeline.step("report"), CommandStep)
    assert pipeline.base == tmp_path.resolve()


def test_a_promote_step_of_a_gates_challenger_carries_that_gates_verdict(tmp_path: Path) -> None:
    pipeline = load_pipeline(write_pipeline(tmp_path, RELEASE))

    promote, pinned = pipeline.step("promote"), pipeline.step("pinned")
    assert isinstance(promote, PromoteStep) and isinstance(pinned, PromoteStep)
    assert promote.gate == "${steps.check.verdict}"
    assert pinned.gate is None
    assert pipeline.needs == {"check": [], "promote": ["check"], "pinned": []}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_file_is_one_sentence_naming_the_file_and_the_step(
    tmp_path: Path, case: str
) -> None:
    text, expected = BAD[case]
    path = write_pipeline(tmp_path, text)

    with pytest.raises(ConfigError) as raised:
        load_pipeline(path)

    message = str(raised.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message
    assert "\n" not in message


def test_set_overrides_a_parameter_and_a_steps_key(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, GOOD)

    pipeline = load_pipeline(path, ["params.seed=7", "steps.sibling.retries=2"])

    assert pipeline.spec.params == {"seed": 7}
    assert pipeline.step("sibling").retries == 2


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("seed", "--set 'seed' is not of the form key.path=value."),
        ("steps.nope.retries=1", "--set 'steps.nope.retries=1': there is no step 'nope'."),
        ("steps.sibling=1", "name a key of a step, not a whole step."),
    ],
)
def test_a_bad_override_is_a_usage_error(tmp_path: Path, override: str, expected: str) -> None:
    path = write_pipeline(tmp_path, GOOD)

    with pytest.raises(UsageError, match=re.escape(expected)):
        load_pipeline(path, [override])


def test_an_override_that_makes_the_file_invalid_names_the_step_and_key(tmp_path: Path) -> None:
    path = write_pipeline(tmp_path, GOOD)

    with pytest.raises(ConfigError, match="step 'sibling': key 'retries'"):
        load_pipeline(path, ["steps.sibling.retries=-1"])

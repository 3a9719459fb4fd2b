from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult

QA = {
    "description": "Answer a question.",
    "template": "Q: {{ question }}\nA:",
    "variables": [{"name": "question", "description": "What is asked."}],
    "examples": [{"question": "What is 2+2?"}],
    "model": {"temperature": 0, "max_tokens": 16},
}
CHAT = {
    "messages": [
        {"role": "system", "template": "Answer in {{ words }} words."},
        {"role": "user", "template": "{{ question }}"},
    ],
    "variables": [{"name": "question"}, {"name": "words", "type": "integer", "default": 3}],
}


def _write(tmp_path: Path, name: str, content: Any) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(content), encoding="utf-8")
    return path


@pytest.fixture
def qa_home(cli: Any, tmp_path: Path) -> Any:
    """The cli with qa@v1 (text) and qa@v2 (chat), qa@production -> v1."""
    assert cli("prompts", "create", "qa", "--file", _write(tmp_path, "qa.yaml", QA)).code == 0
    assert cli("prompts", "create", "qa", "--file", _write(tmp_path, "chat.yaml", CHAT)).code == 0
    assert cli("prompts", "alias", "qa@v1", "production").code == 0
    return cli


def test_create_twice_gives_the_same_version(cli: Any, tmp_path: Path) -> None:
    path = _write(tmp_path, "qa.yaml", QA)

    first = cli("prompts", "create", "qa", "--file", path, "--json")
    again = cli("prompts", "create", "qa", "--file", path, "--json")

    assert (first.code, again.code) == (0, 0)
    assert json.loads(first.stdout)["created"] is True
    assert json.loads(again.stdout)["created"] is False
    assert json.loads(again.stdout)["ref"] == "qa@v1"


def test_list_versions_and_show_print_json_only(qa_home: Any) -> None:
    listed = json.loads(qa_home("prompts", "list", "--json").stdout)
    versions = json.loads(qa_home("prompts", "versions", "qa", "--json").stdout)
    shown = json.loads(qa_home("prompts", "show", "qa@production", "--json").stdout)

    assert [p["ref"] for p in listed] == ["qa@v2"]
    assert [(v["ref"], v["kind"], v["aliases"]) for v in versions] == [
        ("qa@v1", "text", ["production"]),
        ("qa@v2", "chat", []),
    ]
    assert shown["ref"] == "qa@v1"
    assert shown["content"]["template"] == QA["template"]
    assert shown["content"]["examples"] == QA["examples"]
    assert shown["content"]["model"] == {"model": None, "temperature": 0.0, "max_tokens": 16}


def test_render_prints_text_or_messages(qa_home: Any, tmp_path: Path) -> None:
    text = qa_home("prompts", "render", "qa@production", "--var", "question=Why?")
    chat = qa_home(
        "prompts", "render", "qa", "--var", "question=Why?", "--var", "words=5", "--json"
    )
    from_file = qa_home(
        "prompts", "render", "qa", "--vars-file", _write(tmp_path, "v.yaml", {"question": "Hm?"})
    )

    assert text.stdout == "Q: Why?\nA:\n"
    assert json.loads(chat.stdout) == {
        "ref": "qa@v2",
        "rendered": [
            {"role": "system", "content": "Answer in 5 words."},
            {"role": "user", "content": "Why?"},
        ],
    }
    assert from_file.stdout == "[system] Answer in 3 words.\n[user] Hm?\n"


@pytest.mark.parametrize(
    ("args", "code", "sentence"),
    [
        (
            ("render", "qa", "--var", "question=q", "--var", "nope=1"),
            1,
            "error: Prompt qa@v2 has no variable 'nope' (it declares: question, words).",
        ),
        (("render", "qa@v1"), 1, "error: Prompt qa@v1 needs the variable 'question'."),
        (
            ("render", "qa", "--var", "question=q", "--var", "words=many"),
            1,
            "error: Prompt qa@v2's variable 'words' must be an integer, not 'many'.",
        ),
        (("render", "qa", "--var", "question"), 2, "error: --var takes k=v, not 'question'."),
        (("show", "qa@v7"), 1, "error: Prompt 'qa' has no version v7 (its versions are v1..v2)."),
        (("show", "nosuch"), 1, "error: Prompt 'nosuch' does not exist"),
        (("alias", "qa@v1", "latest"), 2, "error: Invalid alias 'latest'"),
        (("versions",), 2, "error: Missing argument 'name'."),
        (
            ("eval", "qa@v1", "--data", "x.jsonl", "--model-url", "u", "--model", "m"),
            1,
            "error: The data file x.jsonl does not exist.",
        ),
    ],
)
def test_bad_input_is_one_sentence_and_its_exit_code(
    qa_home: Any, args: tuple[str, ...], code: int, sentence: str
) -> None:
    result: CliResult = qa_home("prompts", *args)

    assert result.code == code
    assert result.stderr.startswith(sentence)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_split_is_shown_and_cleared(qa_home: Any) -> None:
    assert qa_home("prompts", "alias", "qa@v2", "canary").code == 0

    done = qa_home("prompts", "split", "qa", "production=90", "canary=10")
    shown = json.loads(qa_home("prompts", "show", "qa", "--json").stdout)
    text = qa_home("prompts", "show", "qa@v1")
    cleared = qa_home("prompts", "split", "qa", "--clear", "--json")
    after = json.loads(qa_home("prompts", "show", "qa", "--json").stdout)

    assert (done.code, done.stdout.strip()) == (0, "qa: split canary=10 production=90")
    assert shown["split"] == {"canary": 10, "production": 90}
    assert "split: canary=10 production=90" in text.stdout
    assert json.loads(cleared.stdout) == {
        "name": "qa",
        "split": None,
        "removed": {"canary": 10, "production": 90},
    }
    assert after["split"] is None


@pytest.mark.parametrize(
    ("args", "code", "sentence"),
    [
        (("qa",), 2, "error: Give ALIAS=WEIGHT pairs or --clear, not both and not neither."),
        (("qa", "production=100", "--clear"), 2, "error: Give ALIAS=WEIGHT pairs or --clear"),
        (("qa", "production=100"), 2, "error: A split needs two or more aliases"),
        (("qa", "production=90", "x"), 2, "error: Invalid split 'x'"),
        (("qa", "production=60", "staging=40"), 1, "error: Prompt 'qa' has no alias 'staging'"),
        (("qa", "production=60", "production=40"), 2, "error: The split names alias"),
        (("nosuch", "a=50", "b=50"), 1, "error: Prompt 'nosuch' does not exist"),
    ],
)
def test_bad_split_input_is_one_sentence_and_its_exit_code(
    qa_home: Any, args: tuple[str, ...], code: int, sentence: str
) -> None:
    result: CliResult = qa_home("prompts", "split", *args)

    assert result.code == code
    assert result.stderr.startswith(sentence)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_an_unsafe_prompt_file_exits_1_and_stores_nothing(cli: Any, tmp_path: Path) -> None:
    evil = {"template": "{{ ''.__class__.__mro__[1].__subclasses__() }}"}

    result = cli("prompts", "create", "evil", "--file", _write(tmp_path, "evil.yaml", evil))

    assert result.code == 1
    assert result.stderr == (
        "error: The template of prompt evil reaches for '__subclasses__'; names starting "
        "with '_' and 'self' are refused.\n"
    )
    assert json.loads(cli("prompts", "list", "--json").stdout) == []


def test_a_malformed_prompt_file_names_the_file_and_key(cli: Any, tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.yaml", {"template": "x", "variables": [{"name": "q", "kind": 1}]})

    result = cli("prompts", "create", "bad", "--file", path)

    assert result.code == 1
    assert result.stderr == f"error: {path}: unknown key 'variables.0.kind'.\n"


@pytest.mark.parametrize(
    ("args", "code", "sentence"),
    [
        (("qa@v1",), 2, "error: prompts eval compares two or more different prompt versions."),
        (("qa@v1", "qa@production"), 2, "error: prompts eval compares two or more different"),
        (("qa@v1", "qa@v2"), 2, "error: The exact metric needs --expected-column."),
        (
            ("qa@v1", "qa@v2", "--expected-column", "expected"),
            1,
            "error: Row 1 has no column 'expected'.",
        ),
        (
            ("qa@v1", "qa@v2", "--api-key-env", "FORGEML_TEST_NO_KEY"),
            1,
            "error: The environment variable FORGEML_TEST_NO_KEY holding the API key is not set.",
        ),
    ],
)
def test_eval_refuses_before_calling_the_model_with_one_sentence(
    qa_home: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    code: int,
    sentence: str,
) -> None:
    monkeypatch.delenv("FORGEML_TEST_NO_KEY", raising=False)
    data = tmp_path / "rows.jsonl"
    data.write_text('{"question": "What is 2+2?", "answer": "4"}\n', encoding="utf-8")
    unreachable = "http://127.0.0.1:9/v1"

    result: CliResult = qa_home(
        "prompts", "eval", *args, "--data", data, "--model-url", unreachable, "--model", "m"
    )

    assert result.code == code
    assert result.stderr.startswith(sentence)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("content", "extra", "code", "sentence"),
    [
        ({"question": "q"}, ("--var", "words=2"), 2, "error: Give variables with --var or with"),
        (["q"], (), 1, "expected a mapping of variable names to values."),
    ],
)
def test_render_refuses_two_sources_of_variables_or_a_file_that_is_not_a_mapping(
    qa_home: Any,
    tmp_path: Path,
    content: Any,
    extra: tuple[str, ...],
    code: int,
    sentence: str,
) -> None:
    path = _write(tmp_path, "vars.yaml", content)

    result: CliResult = qa_home("prompts", "render", "qa", "--vars-file", path, *extra)

    assert result.code == code
    assert sentence in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

"""`forgeml prompts` in remote mode prints what it prints locally, with the same errors and
exit codes (a `UsageError` raised by the server exits 2 too), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli._served import (
    Forgeml,
    Served,
    assert_queued_as_job,
    assert_same_as_local,
    served_on,
)

V1 = {"template": "Q: {{ question }}\nA:", "variables": [{"name": "question"}]}
V2 = {"template": "Question: {{ question }}\nAnswer:", "variables": [{"name": "question"}]}
CHAT = {
    "description": "Short answers.",
    "messages": [
        {"role": "system", "template": "Answer in {{ words }} words."},
        {"role": "user", "template": "{{ question }}"},
    ],
    "variables": [{"name": "question"}, {"name": "words", "type": "integer", "default": 3}],
}

# changes made through the server first; each is then repeated on both sides, which must
# print alike (a repeat finds the state the first made)
CHANGES = [
    ("prompts", "create", "qa", "--file", "{v1}"),
    ("prompts", "create", "qa", "--file", "{v2}", "--json"),
    ("prompts", "create", "chat", "--file", "{chat}"),
    ("prompts", "alias", "qa@v1", "production"),
    ("prompts", "alias", "qa@v2", "canary", "--json"),
    ("prompts", "split", "qa", "production=90", "canary=10"),
    ("prompts", "split", "qa", "production=80", "canary=20", "--json"),
]
READS = [
    ("prompts", "list"),
    ("prompts", "list", "--json"),
    ("prompts", "versions", "qa"),
    ("prompts", "versions", "qa", "--json"),
    ("prompts", "show", "qa@production"),
    ("prompts", "show", "chat"),
    ("prompts", "show", "qa@v2", "--json"),
    ("prompts", "render", "qa@v1", "--var", "question=why"),
    ("prompts", "render", "chat", "--var", "question=why", "--var", "words=4", "--json"),
    ("prompts", "render", "chat", "--vars-file", "{vars}"),
    # the same sentence and exit code
    ("prompts", "show", "nosuch"),
    ("prompts", "versions", "nosuch"),
    ("prompts", "alias", "qa@v9", "stable"),
    ("prompts", "render", "qa", "--var", "nosuch=1"),
    ("prompts", "create", "bad", "--file", "{bad}"),
    ("prompts", "split", "qa", "production=50", "canary=10"),  # refused by the server: 2
    ("prompts", "split", "qa", "production"),  # refused before any request: 2
    ("prompts", "split", "qa"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_on(request.param, tmp_path_factory) as home:
        yield home


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("prompt-files")
    written = {}
    for key, content in {"v1": V1, "v2": V2, "chat": CHAT, "vars": {"question": "how"}}.items():
        path = folder / f"{key}.yaml"
        path.write_text(yaml.safe_dump(content))
        written[key] = str(path)
    (folder / "bad.yaml").write_text("template: 'x'\ncolour: red\n")
    written["bad"] = str(folder / "bad.yaml")
    return written


def _args(command: tuple[str, ...], files: dict[str, str]) -> list[str]:
    return [arg.format(**files) for arg in command]


@pytest.mark.slow
def test_prompt_changes_then_reads_print_alike(forgeml: Forgeml, files: dict[str, str]) -> None:
    for command in CHANGES:
        args = _args(command, files)
        first = forgeml.remote(*args)
        assert first.code == 0, first.stderr
        local, remote = forgeml(*args), forgeml.remote(*args)
        assert (remote.code, remote.stdout, remote.stderr) == (
            local.code, local.stdout, local.stderr,
        ), command  # fmt: skip
    for command in READS:
        args = _args(command, files)
        local, remote = forgeml(*args), forgeml.remote(*args)
        assert_same_as_local(local, remote, command)


def test_the_first_create_through_the_server_prints_what_a_local_first_would(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    spec = tmp_path / "p.yaml"
    spec.write_text(yaml.safe_dump(V1))

    remote = forgeml.remote("prompts", "create", "first_remote", "--file", str(spec))
    local = forgeml("prompts", "create", "first_local", "--file", str(spec))

    assert remote.stdout == "created first_remote@v1 (text)\n"
    assert local.stdout == "created first_local@v1 (text)\n"


def test_clearing_a_split_prints_alike(forgeml: Forgeml, files: dict[str, str]) -> None:
    for command in CHANGES[:6]:
        assert forgeml.remote(*_args(command, files)).code == 0
    cleared = forgeml.remote("prompts", "split", "qa", "--clear")
    local = forgeml("prompts", "split", "qa", "--clear", "--json")
    remote = forgeml.remote("prompts", "split", "qa", "--clear", "--json")

    assert cleared.stdout.startswith("qa: split removed (")
    assert (remote.code, remote.stdout) == (local.code, local.stdout)
    assert '"removed": null' in local.stdout


def test_a_usage_error_of_the_server_exits_2_like_the_local_one(forgeml: Forgeml) -> None:
    refused = forgeml.remote("prompts", "split", "nosuch", "a=50", "b=50")

    assert refused.code == 1  # no such prompt: NotFoundError, not a usage error
    refused = forgeml.remote("prompts", "split", "qa", "a=100", "b=0")
    local = forgeml("prompts", "split", "qa", "a=100", "b=0")

    assert refused.code == 2 and refused.stderr.startswith("error: ")
    assert (refused.code, refused.stderr) == (local.code, local.stderr)


def test_a_viewer_may_read_and_render_but_not_create(
    forgeml: Forgeml, files: dict[str, str]
) -> None:
    assert forgeml.remote("prompts", "create", "qa", "--file", files["v1"]).code == 0

    assert forgeml.remote("prompts", "list", token="victor").code == 0
    assert (
        forgeml.remote("prompts", "render", "qa", "--var", "question=x", token="victor").code == 0
    )
    refused = forgeml.remote("prompts", "create", "qb", "--file", files["v1"], token="victor")
    assert refused.code == 1 and refused.stderr.count("\n") == 1
    assert "prompts:write" in refused.stderr


def test_prompts_eval_runs_on_the_server_as_a_job(forgeml: Forgeml) -> None:
    assert_queued_as_job(forgeml, ("prompts", "eval", "qa", "qa@v1", "--data", "x.jsonl"))

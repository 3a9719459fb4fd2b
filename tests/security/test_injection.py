"""Shell injection through a job, pipeline parameter or environment variable (Ray
CVE-2023-6019), and a server log path set to anywhere (Triton CVE-2024-0087)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from forgeml.core.errors import UsageError
from forgeml.core.workspace import inside_home
from forgeml.pipelines._refs import substitute_params
from forgeml.pipelines.job import run_command
from forgeml.pipelines.steps import CommandStep
from forgeml.scheduler.executors.base import AttemptHandle, AttemptStatus, LaunchRequest
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.model import Resources
from forgeml.serve._supervisor import free_port
from tests.scheduler.conftest import wait_for

SRC = Path(__file__).resolve().parents[2] / "src" / "forgeml"
ECHO = "import os, sys; print(repr(sys.argv[1:]), repr(os.environ.get('EVIL')))"


def injections(sentinel: Path) -> list[str]:
    return [
        f"$(touch {sentinel})",
        f"; touch {sentinel}",
        f"`touch {sentinel}`",
        f"| touch {sentinel}",
        f"&& touch {sentinel}",
        f"\ntouch {sentinel}",
    ]


def _finish(executor: LocalExecutor, handle: AttemptHandle) -> AttemptStatus:
    seen: list[AttemptStatus] = []

    def ended() -> bool:
        seen.append(executor.poll(handle))
        return not seen[-1].running

    wait_for(ended, 30)
    return seen[-1]


def test_cve_2023_6019_job_arguments_and_env_reach_the_program_as_data(tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    payloads = injections(sentinel)
    request = LaunchRequest(
        job_id="j1", attempt=1, command=[sys.executable, "-c", ECHO, *payloads],
        env={"FORGEML_JOB_ID": "j1", "EVIL": payloads[0]}, workers=1,
        resources=Resources(1, 0, 1.0), nodes=("local",), log_path=tmp_path / "logs" / "1.log",
    )  # fmt: skip
    executor = LocalExecutor(cpus=[0])

    status = _finish(executor, executor.launch(request))

    assert status.exit_code == 0
    log = (tmp_path / "logs" / "1.log").read_text()
    assert f"{payloads!r} {payloads[0]!r}" in log  # every byte arrived as one argument
    assert not sentinel.exists()


def test_cve_2023_6019_a_pipeline_parameter_stays_one_argument(tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    out = tmp_path / "argv.txt"
    code = "import sys; open(sys.argv[2], 'w').write(repr(sys.argv[1]))"
    for payload in injections(sentinel):
        argv = substitute_params(
            [sys.executable, "-c", code, "${params.note}", str(out)], {"note": payload}
        )
        step = CommandStep(kind="command", name="echo", argv=argv, outputs={"argv": str(out)})

        run_command(step, tmp_path)

        assert out.read_text() == repr(payload)
    assert not sentinel.exists()


def test_cve_2023_6019_nothing_in_forgeml_starts_a_shell() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = ast.unparse(node.func)
            where = f"{path.relative_to(SRC)}:{node.lineno} {func}"
            if func in {
                "os.system",
                "os.popen",
                "subprocess.getoutput",
                "subprocess.getstatusoutput",
            }:
                found.append(where)
            if func.endswith(("create_subprocess_shell", "spawnlp", "execlp")):
                found.append(where)
            for keyword in node.keywords:
                if keyword.arg == "shell" and not (
                    isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                ):
                    found.append(where + " shell=...")

    assert found == []


@pytest.mark.parametrize(
    "path",
    [
        "/etc/cron.d/forgeml",
        "../outside.jsonl",
        "logs/../../outside.jsonl",
        "/tmp/../etc/passwd",
    ],
)
def test_cve_2024_0087_a_log_path_outside_forgeml_home_is_refused(
    tmp_path: Path, path: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()

    with pytest.raises(UsageError) as raised:
        inside_home(home, Path(path), "request log")

    assert str(raised.value).startswith(f"The request log path {path} lies outside FORGEML_HOME")


def test_cve_2024_0087_a_link_inside_home_pointing_out_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    (home / "logs" / "escape").symlink_to(tmp_path)

    with pytest.raises(UsageError, match="lies outside FORGEML_HOME"):
        inside_home(home, Path("logs/escape/requests.jsonl"), "request log")


def test_cve_2024_0087_a_log_path_inside_home_is_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()

    assert inside_home(home, Path("logs/mine.jsonl"), "x") == (home / "logs/mine.jsonl").resolve()
    assert inside_home(home, home / "a.jsonl", "x") == (home / "a.jsonl").resolve()


def test_cve_2024_0087_forgeml_serve_refuses_a_log_path_outside_home(
    cli: object, tmp_path: Path
) -> None:
    from tests.cli.conftest import assert_cli_error

    result = cli(  # type: ignore[operator]
        "serve",
        "any-model@v1",
        "--port",
        str(free_port()),
        "--log-path",
        str(tmp_path / "evil.jsonl"),
    )

    assert_cli_error(result, "lies outside FORGEML_HOME", code=2)
    assert not (tmp_path / "evil.jsonl").exists()

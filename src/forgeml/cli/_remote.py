"""Remote mode: with `FORGEML_SERVER` (or `forgeml --server URL`) commands go through the
control-plane API (`forgeml.client`) instead of the local workspace.

Each command group takes its data through one seam, `source(local)`: the `Client`'s
resource in remote mode, else the group's local functions; both answer what `--json`
prints, so the printing code is one. The heavy commands (train, tune, rag index, pipelines
run, ...: `forgeml.client._commands.JOB_COMMANDS`) run on the server as jobs of its own CLI
(`runs_as_job`, `_remote_jobs`); `RUNS_HERE` commands read only local files and run here.
`check_command` refuses, before anything runs, a command that has no remote mode: the ones
that must run beside their workspace say what to use instead; the rest name the API. What
the server builds for this machine (`models export`'s bundle, `jobs export`'s manifest) it
answers, and the command writes it here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.client import Client

T = TypeVar("T")


@dataclass
class _Given:
    """`--server` / `--token` from the command line (they win over the environment)."""

    server: str | None = None
    token: str | None = None
    client: Client | None = None  # opened on first use, closed when the command ends


_given = _Given()

# (group, command) pairs that go through the API in remote mode
REMOTE_COMMANDS = frozenset(
    {
        ("runs", "list"), ("runs", "show"), ("runs", "compare"), ("runs", "reproduce"),
        ("models", "list"), ("models", "show"), ("models", "promote"), ("models", "card"),
        ("models", "mitigate"), ("models", "export"), ("models", "explain"),
        ("data", "add"), ("data", "list"), ("data", "versions"), ("data", "show"),
        ("data", "head"), ("data", "diff"), ("data", "export"), ("data", "query"),
        ("data", "rebuild"), ("data", "clean"), ("data", "validate"), ("data", "redact"),
        ("data", "split"), ("data", "augment"), ("data", "features"),
        ("jobs", "list"), ("jobs", "show"), ("jobs", "cancel"), ("jobs", "retry"),
        ("jobs", "logs"), ("jobs", "submit"), ("jobs", "export"),
        ("cost", "report"), ("cost", "budgets"),
        ("deploy", "list"), ("deploy", "show"), ("deploy", "delete"),
        ("alerts", "list"), ("alerts", "show"), ("alerts", "ack"),
        # they print forgeml's own rule file and dashboard: nothing of a workspace
        ("monitor", "rules"), ("monitor", "dashboard"),
        ("queues", "create"), ("queues", "list"), ("queues", "show"),
        ("keys", "create"), ("keys", "list"), ("keys", "revoke"), ("keys", "usage"),
        ("audit", "log"), ("audit", "verify"),
        ("lineage", None),  # one command: `forgeml lineage REF`
        ("prompts", "create"), ("prompts", "list"), ("prompts", "versions"),
        ("prompts", "show"), ("prompts", "alias"), ("prompts", "split"),
        ("prompts", "render"),
        ("rag", "show"), ("rag", "versions"), ("rag", "query"),
        ("pipelines", "list"), ("pipelines", "show"),
        ("agent", "run"), ("agent", "show"), ("agent", "approve"),
        ("users", "create"), ("users", "list"), ("users", "show"), ("users", "disable"),
        ("users", "enable"), ("users", "password"),
        ("projects", "create"), ("projects", "list"), ("projects", "members"),
        ("projects", "add-member"), ("projects", "remove-member"),
        ("tokens", "create"), ("tokens", "list"), ("tokens", "revoke"),
        ("label", "create"), ("label", "reorder"), ("label", "list"), ("label", "show"),
        ("label", "next"), ("label", "submit"), ("label", "import"), ("label", "agreement"),
        ("label", "export"),
    }
)  # fmt: skip

# command groups that run beside their workspace: why, and what to use in remote mode instead
LOCAL_ONLY = {
    "init": "creates a workspace on this machine; run it where the server runs",
    "demo": "runs on the embedded default of this machine",
    "server": "serves a workspace of this machine; unset FORGEML_SERVER to start one",
    "serve": "serves models from a workspace of this machine; run it beside the server",
    "gateway": "fronts deployments of a workspace of this machine; run it beside the server",
}


# commands of a group that has a remote mode, which must write onto this machine: why
# (none now: `models export` unpacks the bundle the server builds, `jobs export` writes the
# manifest the server renders; only `jobs export --submit` refuses, in the command)
LOCAL_COMMANDS: dict[tuple[str, str | None], str] = {}
# commands that read only files of this machine, never a workspace: they run here in
# remote mode too (`pipelines graph` of a recorded run reads the server's, as a job)
RUNS_HERE = frozenset({("pipelines", "export"), ("pipelines", "graph")})
# the heavy commands run on the server as jobs (`forgeml.client._commands.JOB_COMMANDS`,
# `_remote_jobs`)


def take_options(args: list[str]) -> list[str]:
    """`args` without the leading global `--server URL` / `--token TOKEN`, which are kept
    for this invocation (each `main` call starts without them)."""
    _given.server = _given.token = None
    rest = list(args)
    while rest and rest[0].split("=", 1)[0] in ("--server", "--token"):
        flag, _, value = rest.pop(0).partition("=")
        if not value:
            if not rest:
                raise UsageError(f"{flag} needs a value. See 'forgeml --help'.")
            value = rest.pop(0)
        setattr(_given, flag.removeprefix("--"), value)
    return rest


def remote_client() -> Client | None:
    """The client of remote mode, or None for the local workspace."""
    from forgeml.client import Client, RemoteSettings

    if _given.client is not None:
        return _given.client
    settings = RemoteSettings()
    server = _given.server or settings.server
    if not server:
        return None
    _given.client = Client(server, _given.token or settings.token, project=settings.project)
    return _given.client


def close_remote() -> None:
    """Close the connections of remote mode (when a command ends)."""
    client, _given.client = _given.client, None
    if client is not None:
        client.close()


def is_remote() -> bool:
    from forgeml.client._settings import RemoteSettings

    return bool(_given.server or RemoteSettings().server)


def check_command(args: Sequence[str]) -> None:
    """Refuse (exit 2) a command that cannot run in remote mode; nothing when local."""
    if "--help" in args or not args or not is_remote():
        return
    group = args[0]
    if runs_here(args) or runs_as_job(args):
        return
    if group in LOCAL_ONLY:
        raise UsageError(f"`forgeml {group}` cannot run in remote mode: it {LOCAL_ONLY[group]}.")
    command = args[1] if len(args) > 1 and not args[1].startswith("-") else None
    if (group, command) in LOCAL_COMMANDS:
        reason = LOCAL_COMMANDS[(group, command)]
        raise UsageError(f"`forgeml {group} {command}` cannot run in remote mode: it {reason}.")
    if (group, command) not in REMOTE_COMMANDS and (group, None) in LOCAL_COMMANDS:
        # a group whose bare form is a command of its own (`forgeml deploy MODEL_REF`)
        reason = LOCAL_COMMANDS[(group, None)]
        raise UsageError(f"`forgeml {group}` cannot run in remote mode: it {reason}.")
    if command is None or (group, command) in REMOTE_COMMANDS or (group, None) in REMOTE_COMMANDS:
        return
    raise UsageError(
        f"`forgeml {group} {command}` has no remote mode; unset FORGEML_SERVER to run it "
        "on this machine, or call the API (/api/v1) directly."
    )


def _command(args: Sequence[str]) -> tuple[str, str | None]:
    command = args[1] if len(args) > 1 and not args[1].startswith("-") else None
    return args[0], command


def runs_here(args: Sequence[str]) -> bool:
    """Whether `forgeml *args` reads only files of this machine (`RUNS_HERE`): a pipeline
    file, not a recorded run."""
    if _command(args) not in RUNS_HERE:
        return False
    if args[1] == "export":
        return True
    # as `pipelines graph` itself tells a file from a run
    target = next((arg for arg in args[2:] if not arg.startswith("-")), "")
    return Path(target).is_file() or Path(target).suffix in (".yaml", ".yml") or "/" in target


def runs_as_job(args: Sequence[str]) -> bool:
    """Whether, in remote mode, `forgeml *args` runs on the server as a job."""
    if "--help" in args or not args or not is_remote():
        return False
    from forgeml.client._commands import job_command

    if _command(args) in REMOTE_COMMANDS or runs_here(args):
        return False
    return job_command(args) is not None


def source(remote: Callable[[Client], T], local: Callable[[], Any]) -> Any:
    """The seam of a command group: `remote(client)` in remote mode, else `local()`."""
    client = remote_client()
    if client is None:
        return local()
    return remote(client)

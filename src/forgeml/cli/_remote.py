"""Remote mode: with `FORGEML_SERVER` (or `forgeml --server URL`) commands go through the
control-plane API (`forgeml.client`) instead of the local workspace.

Each command group takes its data through one seam, `source(local)`: the `Client`'s
resource in remote mode, else the group's local functions; both answer what `--json`
prints, so the printing code is one. `check_command` refuses, before anything runs, a
command that has no remote mode: the ones that must run beside their workspace say what to
use instead; the rest name the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
        ("data", "add"), ("data", "list"), ("data", "versions"), ("data", "show"),
        ("data", "head"), ("data", "diff"), ("data", "export"), ("data", "query"),
        ("data", "rebuild"), ("data", "clean"), ("data", "validate"), ("data", "redact"),
        ("data", "split"), ("data", "augment"), ("data", "features"),
        ("jobs", "list"), ("jobs", "show"), ("jobs", "cancel"), ("jobs", "retry"),
        ("jobs", "logs"), ("jobs", "submit"),
        ("cost", "report"), ("cost", "budgets"),
        ("deploy", "list"), ("deploy", "show"), ("deploy", "delete"),
        ("alerts", "list"), ("alerts", "show"), ("alerts", "ack"),
        # they print forgeml's own rule file and dashboard: nothing of a workspace
        ("monitor", "rules"), ("monitor", "dashboard"),
        ("queues", "list"), ("queues", "show"),
        ("keys", "list"), ("keys", "revoke"),
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
    "train": "trains on this machine; submit it to the server as a job (POST /api/v1/jobs)",
    "finetune": "trains on this machine; submit it to the server as a job (POST /api/v1/jobs)",
    "tune": "trains on this machine; submit it to the server as a job (POST /api/v1/jobs)",
    "optimize": "runs on this machine; submit it to the server as a job (POST /api/v1/jobs)",
}


_BESIDE = "run it beside the server (unset FORGEML_SERVER)"
# commands of a group that has a remote mode, which run beside their workspace: why
LOCAL_COMMANDS: dict[tuple[str, str | None], str] = {
    ("data", "crawl"): f"fetches web pages from this machine; {_BESIDE}",
    ("data", "ingest-stream"): f"reads a message broker from this machine; {_BESIDE}",
    ("models", "export"): f"writes the model's files into a folder of this machine; {_BESIDE}",
    ("jobs", "export"): f"writes or submits a Volcano manifest with this machine's kubeconfig; "
    f"{_BESIDE}",
    ("models", "compare"): f"loads and times the models on this machine; {_BESIDE}",
    ("models", "import"): f"converts a model file of this machine; {_BESIDE}",
    ("monitor", "drift"): f"reads request logs that the model servers write beside the "
    f"workspace; {_BESIDE}",
    ("monitor", "online"): f"reads request logs that the model servers write beside the "
    f"workspace; {_BESIDE}",
    ("monitor", "feedback"): f"records labels from a file of this machine; {_BESIDE}",
    ("monitor", "accuracy"): f"joins feedback with request logs beside the workspace; {_BESIDE}",
    ("monitor", "policy"): f"applies policy files of this machine and drives retraining "
    f"there; {_BESIDE}",
    ("pipelines", "triggers"): f"reads trigger files of this machine; {_BESIDE}",
    ("deploy", "create"): "starts model-server processes beside the workspace; "
    f"{_BESIDE}, or shift a canary's traffic with POST /api/v1/deployments/{{name}}/traffic",
    ("deploy", None): "starts model-server processes beside the workspace; "
    f"{_BESIDE}, or shift a canary's traffic with POST /api/v1/deployments/{{name}}/traffic",
    ("deploy", "rollback"): f"starts model-server processes beside the workspace; {_BESIDE}",
    ("deploy", "check"): f"health-checks model-server processes beside the workspace; {_BESIDE}",
    ("prompts", "eval"): "calls a model endpoint from this machine and records the run in its "
    "workspace; submit it to the server as a job (POST /api/v1/jobs)",
    ("rag", "index"): "reads source files on this machine; submit it to the server as a job "
    "(POST /api/v1/jobs)",
    ("rag", "rebuild"): "reads the index's sources on this machine; submit it to the server as a "
    "job (POST /api/v1/jobs)",
    ("rag", "eval"): "runs the index and a model on this machine; submit it to the server as a job "
    "(POST /api/v1/jobs)",
    ("rag", "answer"): "runs a language model on this machine; run it beside the server",
    ("pipelines", "run"): "runs a pipeline YAML of this machine; submit `forgeml pipelines run` "
    "to the server as a job (POST /api/v1/jobs)",
    ("pipelines", "graph"): "reads a pipeline YAML of this machine; run it where the file is",
    ("pipelines", "export"): "reads a pipeline YAML of this machine; run it where the file is",
}


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
    _given.client = Client(server, _given.token or settings.token)
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


def source(remote: Callable[[Client], T], local: Callable[[], Any]) -> Any:
    """The seam of a command group: `remote(client)` in remote mode, else `local()`."""
    client = remote_client()
    if client is None:
        return local()
    return remote(client)

"""The `forgeml` command line.

Errors a user can cause become one sentence and exit 1 (`ForgemlError.exit_code`); a
command line click cannot parse becomes one line naming the `--help` to read, and exit 2.
Each command's module is imported only when that command runs (see `_lazy`). With
`--server URL` (before the command) or `FORGEML_SERVER`, commands go through the
control-plane API (`_remote`).
"""

from __future__ import annotations

import logging
import sys
import traceback
from contextlib import nullcontext
from functools import cache
from typing import NoReturn

# typer (>= 0.26) vendors click and raises its exceptions; `import click` would not match
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer._click.exceptions import UsageError as ClickUsageError
from typer.exceptions import Abort

from forgeml.cli._lazy import LazyCommand, LazyGroup
from forgeml.cli._remote import (
    check_command,
    close_remote,
    remote_client,
    runs_as_job,
    take_options,
)
from forgeml.core.errors import ForgemlError
from forgeml.core.reading import reading
from forgeml.core.workspace import close_opened_workspaces

# `forgeml --help` lists these in this order; `summary` is the first paragraph of each
# command's own help (tests/cli/test_startup.py holds the two equal)
COMMANDS = (
    LazyCommand(
        "init",
        "forgeml.cli.init:init",
        "Create FORGEML_HOME with its database (migrated) and artifact store.",
    ),
    LazyCommand(
        "demo",
        "forgeml.cli.init:demo",
        "Run the main job end to end on the embedded default (Adult census data).",
    ),
    LazyCommand(
        "train",
        "forgeml.cli.train:train",
        "Train a model on a dataset version; track the run and register the model.",
    ),
    LazyCommand(
        "finetune",
        "forgeml.cli.train:finetune",
        "Fine-tune a pretrained model (LoRA through PEFT, or distillation from a teacher).",
    ),
    LazyCommand(
        "tune",
        "forgeml.cli.train:tune",
        "Hyper-parameter search with Optuna; each trial is a child run.",
    ),
    LazyCommand(
        "server",
        "forgeml.cli.server:server",
        "Run the scheduler until SIGTERM/Ctrl-C; running jobs survive a restart and are "
        "re-adopted.",
    ),
    LazyCommand(
        "optimize",
        "forgeml.cli.optimize:optimize",
        "Make an optimised model version (ONNX, int8 or pruned) whose parent is MODEL_REF.",
    ),
    LazyCommand(
        "serve",
        "forgeml.cli.serve:serve",
        "Serve models over HTTP until SIGTERM/Ctrl-C; ready when /v2/health/ready answers 200.",
    ),
    LazyCommand(
        "gateway",
        "forgeml.cli.gateway:gateway",
        "Serve every deployment behind API keys, limits, canary routing and retries.",
    ),
    LazyCommand("data", "forgeml.cli.data:app", "Versioned datasets and their pipelines."),
    LazyCommand("runs", "forgeml.cli.runs:app", "Tracked training runs (MLflow)."),
    LazyCommand(
        "models", "forgeml.cli.models:app", "Registered model versions, aliases and promotion."
    ),
    LazyCommand("audit", "forgeml.cli.audit:app", "The hash-chained audit log of every change."),
    LazyCommand(
        "lineage",
        "forgeml.cli.lineage:lineage",
        "Where a record came from and what used it: raw files, dataset versions, runs, model "
        "versions and deployments.",
    ),
    LazyCommand(
        "jobs", "forgeml.cli.jobs:app", "Jobs: submit any command, follow it, cancel or retry it."
    ),
    LazyCommand(
        "queues", "forgeml.cli.queues:app", "Queues: weights, capabilities, reclaimable, budgets."
    ),
    LazyCommand(
        "cost",
        "forgeml.cli.cost:app",
        "Measured use and cost of jobs and gateway keys; queue budgets.",
    ),
    LazyCommand(
        "deploy",
        "forgeml.cli.deploy:app",
        "Deploy a model as a named set of model-server processes, and manage deployments.",
    ),
    LazyCommand(
        "pipelines",
        "forgeml.cli.pipelines:app",
        "Pipelines: YAML DAGs of steps run as jobs, cached by content.",
    ),
    LazyCommand(
        "monitor",
        "forgeml.cli.monitor:app",
        "Watch models after they ship: drift, feedback, accuracy, alert rules, dashboards, "
        "and the policies that retrain and release them.",
    ),
    LazyCommand(
        "alerts",
        "forgeml.cli.alerts:app",
        "Alerts fired by forgeml server's rules or received from Alertmanager.",
    ),
    LazyCommand(
        "prompts",
        "forgeml.cli.prompts:app",
        "Versioned prompt templates (sandboxed Jinja2), aliases, rendering and evaluation.",
    ),
    LazyCommand(
        "keys",
        "forgeml.cli.keys:app",
        "API keys for the gateway, per project: stored as salted hashes, scoped to the "
        "project's deployments.",
    ),
    LazyCommand(
        "label",
        "forgeml.cli.label:app",
        "Labelling tasks: active-learning order, agreement, import and export of labels.",
    ),
    LazyCommand("rag", "forgeml.cli.rag:app", "RAG indexes: build, version, rebuild and search."),
    LazyCommand(
        "agent", "forgeml.cli.agent:app", "Agents that call tools, within budgets, with approval."
    ),
    LazyCommand(
        "users",
        "forgeml.cli.users:app",
        "Accounts: people (password or OIDC) and service accounts (tokens).",
    ),
    LazyCommand(
        "projects", "forgeml.cli.projects:app", "Projects and the role each account holds in them."
    ),
    LazyCommand(
        "tokens",
        "forgeml.cli.tokens:app",
        "API tokens: prefixed, stored hashed, scoped, expiring, revocable.",
    ),
)
# a command that ends with this code was interrupted (typer turns Ctrl-C into it)
_INTERRUPTED = 130


@cache
def command_tree() -> LazyGroup:
    """The root `forgeml` group; its commands load on first use."""
    return LazyGroup(
        name="forgeml",
        help="forgeml: raw data to a trained, served and monitored model. Before a command, "
        "--server URL and --token TOKEN (or FORGEML_SERVER, FORGEML_TOKEN) run it through a "
        "control plane.",
        no_args_is_help=True,
        lazy_commands=COMMANDS,
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, mapping errors to a sentence and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
        # every library's debug lines on stderr; nothing secret may reach them (a test
        # greps them for every token, password, cookie and key a session issues)
        logging.basicConfig(
            level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s %(message)s"
        )
    try:
        args = take_options(args)
        check_command(args)
        if runs_as_job(args):  # remote mode of a heavy command: a job on the server
            code = _run_as_job(args)
        else:
            with reading() if _only_reads(args) else nullcontext():
                code = command_tree().main(args=args, prog_name="forgeml", standalone_mode=False)
    except ForgemlError as error:
        _fail(f"error: {error}", error.exit_code, debug)
    except NoArgsIsHelpError as error:
        # a bare group answers with its help: typer's rich formatter printed it when the
        # error was made, the plain one returns it
        if error.format_message():
            print(error.format_message())
        sys.exit(error.exit_code)
    except ClickUsageError as error:
        _fail(usage_line(error), error.exit_code, debug)
    except ClickException as error:
        _fail(f"error: {_one_line(error.format_message())}", error.exit_code, debug)
    except Abort:
        _fail("Aborted.", _INTERRUPTED, debug)
    finally:
        close_remote()
        close_opened_workspaces()
    # without standalone mode click returns the code of a `typer.Exit` instead of exiting
    if code == _INTERRUPTED:
        _fail("Aborted.", _INTERRUPTED, debug=False)
    if isinstance(code, int) and code:
        sys.exit(code)


def _run_as_job(args: list[str]) -> int:
    from forgeml.cli._remote_jobs import run_as_job

    client = remote_client()
    assert client is not None  # runs_as_job: remote mode
    return run_as_job(client, args)


# leaf commands that only read: their store sessions take no writers' lock (a write they
# must do, like reaping dead runs or creating the default queue, asks for one itself)
_READ_COMMANDS = frozenset({"list", "show", "compare"})


def _only_reads(args: list[str]) -> bool:
    words = [arg for arg in args[:2] if not arg.startswith("-")]
    return len(words) == 2 and words[1] in _READ_COMMANDS


def usage_line(error: ClickUsageError) -> str:
    """`error: <what is wrong>. See 'forgeml <command> --help'.`, on one line."""
    line = f"error: {_one_line(error.format_message())}"
    if not line.endswith((".", "?")):
        line += "."
    ctx = error.ctx
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        line += f" See '{ctx.command_path} {ctx.help_option_names[0]}'."
    return line


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _fail(line: str, code: int, debug: bool) -> NoReturn:
    if debug:
        traceback.print_exc()
    print(line, file=sys.stderr)
    sys.exit(code)

"""The `forgeml` command line. Errors a user can cause become one sentence and exit 1."""

from __future__ import annotations

import sys
import traceback

import click
import typer

from forgeml.cli import audit as audit_commands
from forgeml.cli import cost as cost_commands
from forgeml.cli import data as data_commands
from forgeml.cli import deploy as deploy_commands
from forgeml.cli import gateway as gateway_commands
from forgeml.cli import init as init_commands
from forgeml.cli import jobs as jobs_commands
from forgeml.cli import keys as keys_commands
from forgeml.cli import models as models_commands
from forgeml.cli import optimize as optimize_commands
from forgeml.cli import queues as queues_commands
from forgeml.cli import runs as runs_commands
from forgeml.cli import serve as serve_commands
from forgeml.cli import server as server_commands
from forgeml.cli import train as train_commands
from forgeml.core.errors import ForgemlError

app = typer.Typer(
    name="forgeml",
    help="forgeml: raw data to a trained, served and monitored model.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("init")(init_commands.init)
app.command("demo")(init_commands.demo)
app.command("train")(train_commands.train)
app.command("finetune")(train_commands.finetune)
app.command("tune")(train_commands.tune)
app.add_typer(data_commands.app, name="data")
app.add_typer(runs_commands.app, name="runs")
app.add_typer(models_commands.app, name="models")
app.add_typer(audit_commands.app, name="audit")
app.add_typer(jobs_commands.app, name="jobs")
app.add_typer(queues_commands.app, name="queues")
app.add_typer(cost_commands.app, name="cost")
app.command("server")(server_commands.server)
app.command("optimize")(optimize_commands.optimize)
app.command("serve")(serve_commands.serve)
app.add_typer(deploy_commands.app, name="deploy")
app.command("gateway")(gateway_commands.gateway)
app.add_typer(keys_commands.app, name="keys")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, mapping errors to a sentence and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    try:
        app(args=args, prog_name="forgeml", standalone_mode=False)
    except ForgemlError as error:
        if debug:
            traceback.print_exc()
        print(f"error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        print("Aborted.", file=sys.stderr)
        sys.exit(130)

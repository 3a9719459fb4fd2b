"""`forgeml server`'s options that have a typed source elsewhere agree with it."""

from __future__ import annotations

from typing import Any

from forgeml.cli import command_tree
from forgeml.monitor.drift import OnlineDriftConfig


def test_the_online_run_length_has_the_config_s_bounds(cli: Any) -> None:
    server = command_tree().get_command(None, "server")
    (option,) = [p for p in server.params if p.name == "online_run_length"]
    field = OnlineDriftConfig.model_fields["run_length"]
    bounds = {type(m).__name__: m for m in field.metadata}
    assert (option.min, option.max) == (bounds["Ge"].ge, bounds["Le"].le)

    refused = cli("server", "--online-run-length", "5")
    assert refused.code == 2 and refused.stderr.count("\n") == 1
    assert (
        "--online-run-length" in refused.stderr and "greater than or equal to 10" in refused.stderr
    )


def test_a_ray_token_file_needs_the_ray_executor(cli: Any, tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("not used")
    refused = cli("server", "--ray-token-file", str(token))
    assert refused.code == 2 and refused.stderr.count("\n") == 1
    assert "--ray-token-file is for the ray executor" in refused.stderr

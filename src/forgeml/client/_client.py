"""`Client`: the control-plane API as Python objects, one attribute per resource."""

from __future__ import annotations

from types import TracebackType
from typing import Any
from urllib.parse import quote

from forgeml.client._accounts import Projects, Tokens, Users
from forgeml.client._commands import Commands
from forgeml.client._labels import Labels
from forgeml.client._registries import Agents, Pipelines, Prompts, Rag
from forgeml.client._resources import (
    Alerts,
    Audit,
    Cost,
    Datasets,
    Deployments,
    Jobs,
    Keys,
    Models,
    Queues,
    Runs,
)
from forgeml.client._settings import RemoteSettings
from forgeml.client._transport import Transport


class Client:
    """The forgeml control plane at `server`, called with `token` (None: no login, as the
    embedded single-user server allows), acting in `project` (None: the server's default,
    `default`).

    Each method answers what the matching CLI command prints with `--json`; lists follow
    the API's keyset pages to their end. Errors are the `ForgemlError`s the local code
    raises, with the server's sentence.

    Raises:
        ConfigError: `server` is not an http(s) URL.
    """

    def __init__(
        self,
        server: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        project: str | None = None,
    ) -> None:
        self.transport = Transport(server, token, timeout=timeout, project=project)
        self.runs = Runs(self.transport)
        self.models = Models(self.transport)
        self.datasets = Datasets(self.transport)
        self.jobs = Jobs(self.transport)
        self.queues = Queues(self.transport)
        self.keys = Keys(self.transport)
        self.audit = Audit(self.transport)
        self.prompts = Prompts(self.transport)
        self.rag = Rag(self.transport)
        self.pipelines = Pipelines(self.transport)
        self.agents = Agents(self.transport)
        self.users = Users(self.transport)
        self.projects = Projects(self.transport)
        self.tokens = Tokens(self.transport)
        self.cost = Cost(self.transport)
        self.alerts = Alerts(self.transport)
        self.deployments = Deployments(self.transport)
        self.labels = Labels(self.transport)
        self.commands = Commands(self.transport)

    @classmethod
    def from_env(cls) -> Client | None:
        """A client for `FORGEML_SERVER` with `FORGEML_TOKEN` in `FORGEML_PROJECT`, or None
        when no server is set."""
        settings = RemoteSettings()
        if not settings.server:
            return None
        return cls(settings.server, settings.token, project=settings.project)

    def lineage(
        self, ref: str, *, depth: int | None = None, direction: str = "both"
    ) -> dict[str, Any]:
        """The lineage around a dataset version, model version, run or deployment
        (`forgeml lineage REF --json`): raw files, datasets, runs, models, deployments."""
        params: dict[str, Any] = {"direction": direction}
        if depth is not None:
            params["depth"] = depth
        return dict(self.transport.get(f"/lineage/{quote(ref, safe='@')}", params))

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

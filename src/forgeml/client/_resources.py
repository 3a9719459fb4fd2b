"""One small class per API resource; each method answers what the CLI's `--json` prints."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from forgeml.client._transport import Transport
from forgeml.core.errors import ServiceUnavailableError, UsageError

# a list of answers; named so the `list` methods do not shadow the type in their classes
Items = list[dict[str, Any]]


def _segment(value: str) -> str:
    # a name or ref is one path segment: a `/` in it must not reach another route
    return quote(value, safe="@")


class _Resource:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport


class Runs(_Resource):
    """Tracked training runs (`/api/v1/runs`)."""

    def list(self, name: str | None = None) -> Items:
        """Runs, newest first (`runs list --json`)."""
        return self._transport.pages("/runs", {"name": name} if name else None)

    def show(self, ref: str) -> dict[str, Any]:
        """A run by id, id prefix or name (`runs show --json`)."""
        return self._transport.get(f"/runs/{_segment(ref)}")

    def metrics(self, ref: str, keys: Sequence[str] | None = None) -> dict[str, Any]:
        """Every logged value of the run's metrics, as [step, value] pairs by step."""
        params = {"key": list(keys)} if keys else None
        return self._transport.get(f"/runs/{_segment(ref)}/metrics", params)

    def reproduce(
        self,
        ref: str,
        data: str | None = None,
        overrides: Sequence[str] = (),
        queue: str = "default",
    ) -> dict[str, Any]:
        """Queue a training job from the run's recorded config (`runs reproduce --detach
        --json`): `{"job_id", "state"}`."""
        body = {"data": data, "overrides": list(overrides), "queue": queue}
        return self._transport.post(f"/runs/{_segment(ref)}/reproduce", body)


class Models(_Resource):
    """Registered model versions and promotion (`/api/v1/models`)."""

    def list(self, name: str | None = None) -> Items:
        """Versions with their aliases, by name then version (`models list --json`)."""
        return self._transport.pages("/models", {"name": name} if name else None)

    def show(self, ref: str) -> dict[str, Any]:
        """A version by `NAME`, `NAME@vN` or `NAME@ALIAS` (`models show --json`)."""
        return self._transport.get(f"/models/{_segment(ref)}")

    def promote(
        self,
        name: str,
        version: int,
        alias: str = "production",
        metric: str = "accuracy",
        mode: str = "max",
        force: bool = False,
        max_dp_diff: float | None = None,
        max_eo_diff: float | None = None,
    ) -> dict[str, Any]:
        """Point `alias` at the version if it wins on `metric` and keeps within the fairness
        bounds given (`models promote --json`)."""
        body: dict[str, Any] = {"version": version, "alias": alias, "metric": metric}
        body |= {"mode": mode, "force": force}
        bounds = {"max_dp_diff": max_dp_diff, "max_eo_diff": max_eo_diff}
        body |= {key: value for key, value in bounds.items() if value is not None}
        return self._transport.post(f"/models/{_segment(name)}/promote", body)

    def mitigate(
        self,
        ref: str,
        sensitive: str,
        constraint: str = "demographic_parity",
        objective: str = "accuracy_score",
        fit_split: str = "validation",
    ) -> dict[str, Any]:
        """Fit group thresholds and register them as a new version (`models mitigate --json`)."""
        body = {"sensitive": sensitive, "constraint": constraint, "objective": objective}
        return self._transport.post(
            f"/models/{_segment(ref)}/mitigate", body | {"fit_split": fit_split}
        )

    def card(self, ref: str, card_format: str = "md") -> dict[str, Any]:
        """The version's model card, `md` or `html` (`models card --json`)."""
        path = self._version_path(ref) + "/card"
        return self._transport.get(path, {"format": card_format})

    def set_card(
        self, ref: str, intended_use: str | None = None, limitations: str | None = None
    ) -> dict[str, Any]:
        """Record the version's intended use and/or limitations for its card (audited)."""
        body = {"intended_use": intended_use, "limitations": limitations}
        return self._transport.send_json("PUT", self._version_path(ref) + "/card", body)

    def explain(
        self,
        ref: str,
        rows: Sequence[Any] | None = None,
        text: str | None = None,
        top: int | None = None,
        method: str | None = None,
        background: int = 50,
    ) -> dict[str, Any]:
        """Attributions of the version's answer to each of `rows` (or to one `text`),
        largest first (`models explain --json`); the server explains a few rows at a time."""
        body: dict[str, Any] = {
            "inputs": None if rows is None else [*rows],
            "text": text,
            "top": top,
            "method": method,
        }
        body = {key: value for key, value in body.items() if value is not None}
        return self._transport.post(
            self._version_path(ref) + "/explain", body | {"background": background}
        )

    def export(
        self, ref: str, folder: Path, target: str = "edge", precision: str = "auto"
    ) -> dict[str, Any]:
        """Build the version's edge bundle on the server and unpack it as the new (or empty)
        `folder` here (`models export --json`: the manifest's figures, `folder` this one).

        Raises:
            AlreadyExistsError: `folder` holds something.
            InvalidDataError: the archive holds a link or a member outside the folder.
        """
        import tempfile

        from forgeml.core.archives import SUMMARY_HEADER, unpack_folder

        path = self._version_path(ref) + "/export"
        folder.parent.mkdir(parents=True, exist_ok=True)
        params = {"target": target, "precision": precision}
        with tempfile.TemporaryDirectory(prefix=".forgeml-export-", dir=folder.parent) as scratch:
            blob = Path(scratch) / "bundle.tar"
            with self._transport.stream("GET", path, params=params) as answer:
                summary: dict[str, Any] = orjson.loads(answer.headers[SUMMARY_HEADER])
                with blob.open("wb") as out:
                    for chunk in answer.iter_bytes():
                        out.write(chunk)
            unpack_folder(blob, folder, f"the {target} bundle of {ref}")
        return summary | {"folder": str(folder)}

    def _version_path(self, ref: str) -> str:
        version = self.show(ref)  # an alias or digest prefix resolves on the server
        return f"/models/{_segment(version['name'])}/versions/{version['version']}"


class Datasets(_Resource):
    """Versioned datasets (`/api/v1/datasets`)."""

    def list(self) -> Items:
        """Every dataset with its latest version, by name (`data list --json`)."""
        return self._transport.pages("/datasets")

    def versions(self, name: str) -> Items:
        """Every version of a dataset, oldest first (`data versions --json`)."""
        return self._transport.pages(f"/datasets/{_segment(name)}/versions")

    def show(self, ref: str) -> dict[str, Any]:
        """Schema, rows, quality report and lineage of a version (`data show --json`)."""
        return self._transport.get(f"/datasets/{_segment(ref)}")

    def upload(self, name: str, path: Path, **options: Any) -> dict[str, Any]:
        """Upload a file as a new version of `name` (`data add --json`); `options` are the
        route's query (format, delimiter, header, names, on_bad_rows, label).

        Raises:
            UsageError: `path` is not a file (a folder of images or texts is added where
                it lies, with `forgeml data add` beside the server).
        """
        if not path.is_file():
            raise UsageError(
                f"{path} is not a file; only a file can be uploaded (add a folder with "
                "`forgeml data add` beside the server)."
            )
        params = {"filename": path.name, **options}
        with path.open("rb") as body:
            return self._transport.post(
                f"/datasets/{_segment(name)}/versions", params=params, content=body
            )

    def frame(self, ref: str, split: str | None = None, limit: int | None = None) -> Any:
        """`(ref resolved, polars DataFrame)` of a version's rows (`data head|export`)."""
        import polars as pl

        params: dict[str, Any] = {"split": split} if split else {}
        if limit is not None:
            params["limit"] = limit
        answer = self._transport.send("GET", f"/datasets/{_segment(ref)}/frame", params=params)
        return answer.headers["X-Dataset-Ref"], pl.read_ipc_stream(answer.content)

    def diff(self, ref: str, to: str) -> dict[str, Any]:
        """Changes from `ref` to `to` (`data diff --json`)."""
        return self._transport.get(f"/datasets/{_segment(ref)}/diff", {"to": to})

    def query(self, sql: str, limit: int = 100) -> dict[str, Any]:
        """`{"columns", "rows"}` of one read-only SQL statement (`data query`)."""
        return self._transport.post("/datasets/query", {"sql": sql, "limit": limit})

    def rebuild(self, ref: str) -> dict[str, Any]:
        """Re-derive a version and compare digests: `{"ref", "digest", "actual"}`."""
        return self._transport.post(f"/datasets/{_segment(ref)}/rebuild")

    def derive(
        self,
        ref: str,
        op: str,
        params: dict[str, Any],
        name: str | None = None,
        spec_name: str | None = None,
    ) -> dict[str, Any]:
        """Apply transform `op` to a version (`data clean|validate|... --json`)."""
        body = {"op": op, "params": params, "name": name, "spec_name": spec_name}
        return self._transport.post(f"/datasets/{_segment(ref)}/derive", body)


class Jobs(_Resource):
    """Scheduler jobs (`/api/v1/jobs`)."""

    def submit(self, command: list[str], **fields: Any) -> dict[str, Any]:
        """Queue a command job (`jobs submit --detach --json`); `fields` as the API takes
        them (name, queue, priority, resources, ...)."""
        return self._transport.post("/jobs", {"command": command, **fields})

    def list(
        self, states: Sequence[str] | None = None, queue: str | None = None, limit: int = 100
    ) -> Items:
        """At most `limit` jobs, newest first (`jobs list --json`)."""
        params: dict[str, Any] = {"limit": limit}
        if states:
            params["state"] = list(states)
        if queue:
            params["queue"] = queue
        # one page: `limit` is the CLI's "at most this many"
        return self._transport.get("/jobs", params)

    def show(self, ref: str) -> dict[str, Any]:
        """A job's state, attempts and events (`jobs show --json`)."""
        return self._transport.get(f"/jobs/{_segment(ref)}")

    def cancel(self, ref: str) -> dict[str, Any]:
        """Cancel a job (`jobs cancel --json`)."""
        return self._transport.post(f"/jobs/{_segment(ref)}/cancel")

    def retry(self, ref: str) -> dict[str, Any]:
        """Queue a FAILED or CANCELLED job again (`jobs retry --json`)."""
        return self._transport.post(f"/jobs/{_segment(ref)}/retry")

    def log(self, ref: str, attempt: int | None = None) -> bytes:
        """An attempt's log as it stands, default the last (`jobs logs`)."""
        params = {"attempt": attempt} if attempt is not None else None
        return self._transport.send("GET", f"/jobs/{_segment(ref)}/log", params=params).content

    def export(
        self, ref: str, export_format: str = "volcano", image: str = "forgeml:latest",
        namespace: str = "default",
    ) -> str:  # fmt: skip
        """The job's Volcano manifest as YAML text (`jobs export`)."""
        params = {"format": export_format, "image": image, "namespace": namespace}
        answer = self._transport.get(f"/jobs/{_segment(ref)}/export", params)
        return str(answer["manifest"])

    def follow(self, ref: str, output: Callable[[bytes], object]) -> dict[str, Any]:
        """Stream the job's log to `output` until it ends (`jobs logs -f`, over Server-Sent
        Events); answers the `end` event: `{"job_id", "state", "attempts"}`."""
        with self._transport.stream("GET", f"/jobs/{_segment(ref)}/logs") as answer:
            for name, data in server_sent_events(answer.iter_lines()):
                if name == "log":
                    output(data.encode())
                elif name == "end":
                    ended: dict[str, Any] = orjson.loads(data)
                    return ended
        raise ServiceUnavailableError(
            f"The server closed the log stream of job {ref} before the job ended."
        )


def server_sent_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """`(event, data)` of each event in a Server-Sent Events stream (the WHATWG HTML
    standard, 9.2: `data:` lines joined by newlines; a blank line ends an event; lines
    starting with `:` are comments)."""
    name, data = "message", list[str]()
    for line in lines:
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", list[str]()
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)


class Queues(_Resource):
    """Scheduler queues (`/api/v1/queues`)."""

    def list(self) -> Items:
        """Every queue (`queues list --json`)."""
        return self._transport.pages("/queues")

    def show(self, name: str) -> dict[str, Any]:
        """A queue and its jobs counted by state (`queues show --json`)."""
        return self._transport.get(f"/queues/{_segment(name)}")

    def create(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Create a queue from `queues create`'s fields (name, weight, capability,
        reclaimable, budget); answers it as `queues create --json` prints it."""
        return self._transport.post("/queues", fields)


class Keys(_Resource):
    """The gateway's API keys (`/api/v1/keys`); never a secret or a hash but `create`'s."""

    def create(
        self,
        name: str,
        scopes: Sequence[str] | None = None,
        rate_per_s: float | None = None,
        burst: int | None = None,
        daily_quota: int | None = None,
    ) -> dict[str, Any]:
        """A key scoped to `scopes` (default: every deployment), with its secret in `key`,
        answered once (`keys create --json`)."""
        body = {
            "name": name,
            "scopes": list(scopes) if scopes is not None else None,
            "rate_per_s": rate_per_s,
            "burst": burst,
            "daily_quota": daily_quota,
        }
        return self._transport.post("/keys", body)

    def list(self) -> Items:
        """Every key, oldest first (`keys list --json`)."""
        return self._transport.pages("/keys")

    def revoke(self, key: str) -> dict[str, Any]:
        """Revoke a key by its prefix or id (`keys revoke --json`)."""
        return self._transport.post(f"/keys/{_segment(key)}/revoke")

    def usage(self, since: datetime | None = None) -> Items:
        """Requests, errors and rejections per key and deployment from `since` (UTC) on, as
        the gateways flushed them (`keys usage --json`)."""
        params = {"since": since.isoformat()} if since is not None else None
        answer: Items = self._transport.get("/keys/usage", params)
        return answer


class Audit(_Resource):
    """The hash-chained audit log (`/api/v1/audit`)."""

    def latest(self, limit: int = 50) -> Items:
        """The latest `limit` events, oldest of them first (`audit log --json`)."""
        newest = self._transport.get("/audit", {"limit": limit, "order": "desc"})
        return list(reversed(newest))

    def verify(self) -> dict[str, Any]:
        """The chain checked against its checkpoint: `{"intact", "events", "head"}`."""
        return self._transport.get("/audit/verify")


class Cost(_Resource):
    """Use and cost of jobs and gateway keys; queue budgets (`/api/v1/cost`)."""

    def report(self, by: str = "job", since: str | None = None) -> dict[str, Any]:
        """Use and cost grouped `by`, costliest first, with the total (`cost report --json`)."""
        params = {"by": by} | ({"since": since} if since else {})
        return self._transport.get("/cost/report", params)

    def budgets(self) -> dict[str, Any]:
        """Spend against budget of every queue that has one (`cost budgets --json`)."""
        return self._transport.get("/cost/budgets")


class Alerts(_Resource):
    """Alerts fired by the server's rules or received from Alertmanager (`/api/v1/alerts`)."""

    def list(self, state: str = "firing") -> Items:
        """Alerts in `state`, newest first (`alerts list --json`)."""
        answer: Items = self._transport.get("/alerts", {"state": state})["alerts"]
        return answer

    def show(self, alert_id: str) -> dict[str, Any]:
        """One alert by its id or a unique prefix of it (`alerts show --json`)."""
        return self._transport.get(f"/alerts/{_segment(alert_id)}")

    def ack(self, alert_id: str) -> dict[str, Any]:
        """Acknowledge an alert (the first acknowledgement is kept)."""
        return self._transport.post(f"/alerts/{_segment(alert_id)}/ack")


class Deployments(_Resource):
    """Deployments of model versions (`/api/v1/deployments`)."""

    def list(self, deleted: bool = False) -> Items:
        """Every deployment not deleted (or every one), by name (`deploy list --json`)."""
        return self._transport.pages("/deployments", {"deleted": deleted} if deleted else None)

    def show(self, name: str) -> dict[str, Any]:
        """A deployment, its revision, spec and replicas (`deploy show --json`)."""
        return self._transport.get(f"/deployments/{_segment(name)}")

    def delete(self, name: str) -> dict[str, Any]:
        """Stop every replica and mark the deployment deleted (`deploy delete --json`)."""
        return self._transport.send_json("DELETE", f"/deployments/{_segment(name)}")

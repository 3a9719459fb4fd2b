"""Client resources of the prompt registry, RAG indexes, pipeline runs and agent runs; each
method answers what the matching CLI command prints with `--json`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from forgeml.client._resources import Items, _Resource, _segment
from forgeml.client._transport import PAGE_LIMIT


class Prompts(_Resource):
    """Versioned prompt templates (`/api/v1/prompts`)."""

    def create(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Store `spec` (PROMPT.yaml's content) as the next version (`prompts create --json`)."""
        return self._transport.post(f"/prompts/{_segment(name)}/versions", dict(spec))

    def list(self) -> Items:
        """Every prompt at its latest version (`prompts list --json`)."""
        return self._transport.pages("/prompts")

    def versions(self, name: str) -> Items:
        """Every version of a prompt, oldest first (`prompts versions --json`)."""
        return self._transport.pages(f"/prompts/{_segment(name)}/versions")

    def show(self, ref: str) -> dict[str, Any]:
        """A version with its content and split (`prompts show --json`)."""
        return self._transport.get(f"/prompts/{_segment(ref)}")

    def alias(self, ref: str, alias: str) -> dict[str, Any]:
        """Point `NAME@alias` at the version `ref` names (`prompts alias --json`)."""
        return self._transport.post(f"/prompts/{_segment(ref)}/alias", {"alias": alias})

    def split(self, name: str, weights: Mapping[str, int]) -> dict[str, Any]:
        """Split the prompt's traffic between aliases (`prompts split --json`)."""
        body = {"weights": dict(weights)}
        return self._transport.send_json("PUT", f"/prompts/{_segment(name)}/split", body)

    def clear_split(self, name: str) -> dict[str, Any]:
        """Remove the prompt's split (`prompts split --clear --json`)."""
        return self._transport.send_json("DELETE", f"/prompts/{_segment(name)}/split")

    def render(
        self, ref: str, variables: Mapping[str, Any], as_text: bool = False
    ) -> dict[str, Any]:
        """`{"ref", "rendered"}` for the variables (`prompts render --json`)."""
        body = {"variables": dict(variables), "as_text": as_text}
        return self._transport.post(f"/prompts/{_segment(ref)}/render", body)


class Rag(_Resource):
    """RAG index versions and search (`/api/v1/rag/indexes`)."""

    def list(self) -> Items:
        """Every index at its latest version, with its `name`."""
        return self._transport.pages("/rag/indexes")

    def versions(self, name: str) -> Items:
        """Every version of an index, oldest first (`rag versions --json`)."""
        return self._transport.pages(f"/rag/indexes/{_segment(name)}/versions")

    def show(self, ref: str) -> dict[str, Any]:
        """A version's digest, config and lineage (`rag show --json`)."""
        return self._transport.get(f"/rag/indexes/{_segment(ref)}")

    def query(
        self,
        ref: str,
        text: str,
        k: int = 5,
        mode: str = "hybrid",
        filters: Mapping[str, str] | None = None,
        weight: float | None = None,
    ) -> Items:
        """The `k` best chunks for `text` (`rag query --json`)."""
        body = {"text": text, "k": k, "mode": mode, "filters": dict(filters or {})}
        if weight is not None:
            body["weight"] = weight
        answer: Items = self._transport.post(f"/rag/indexes/{_segment(ref)}/query", body)
        return answer


class Pipelines(_Resource):
    """Pipeline runs (`/api/v1/pipelines/runs`)."""

    def list(self, limit: int = 100) -> Items:
        """At most `limit` runs without their steps, newest first (`pipelines list --json`)."""
        if limit <= PAGE_LIMIT:  # one page
            answer: Items = self._transport.get("/pipelines/runs", {"limit": limit})
            return answer
        return self._transport.pages("/pipelines/runs")[:limit]

    def show(self, ref: str) -> dict[str, Any]:
        """A run with its steps (`pipelines show --json`)."""
        return self._transport.get(f"/pipelines/runs/{_segment(ref)}")


class Agents(_Resource):
    """Agent runs (`/api/v1/agents/runs`), driven on the server within their budgets."""

    def start(
        self, spec: Mapping[str, Any], task: str, approve: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Start a run of the agent `spec` on `task`; its summary as it starts."""
        body = {"spec": dict(spec), "task": task, "approve": list(approve)}
        return self._transport.post("/agents/runs", body)

    def show(self, run_id: str) -> dict[str, Any]:
        """A run with its transcript (`agent show --json`); `stop_reason` null while it runs."""
        return self._transport.get(f"/agents/runs/{_segment(run_id)}")

    def wait(
        self,
        run_id: str,
        *,
        poll_s: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any]:
        """The run once it has stopped (answered, waiting for approval, or out of budget):
        shown every `poll_s` until then; its own budgets bound how long that is."""
        while True:
            shown = self.show(run_id)
            if shown["stop_reason"] is not None:
                return shown
            sleep(poll_s)

    def approve(
        self,
        run_id: str,
        calls: Sequence[str] = (),
        deny: Sequence[str] = (),
        tools: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Let held calls (or tools) run, refuse others, and resume the run."""
        body = {"approve": list(calls), "deny": list(deny), "tools": list(tools)}
        return self._transport.post(f"/agents/runs/{_segment(run_id)}/approve", body)

"""The control plane's HTTP API (FastAPI): the seed of issue 15's `forgeml.api`.

For now it serves alerts: `GET /api/v1/alerts`, `GET /api/v1/alerts/{id}`,
`POST /api/v1/alerts/{id}/ack`, and `POST /api/v1/alertmanager`, the receiver of a real
Alertmanager's webhook; and agent runs: `POST /api/v1/agents/runs` (202: started in the
background), `GET /api/v1/agents/runs/{id}`, `POST /api/v1/agents/runs/{id}/approve`.
Over the resources the CLI manages (one router per concern, each answering what the CLI's
`--json` prints, `_json`): datasets, jobs with their logs as Server-Sent Events, queues,
runs and their metrics, models, deployments, keys, prompts, RAG indexes, pipeline runs,
cost and audit. Lists are keyset pages (`_pages`); limits are `_limits`.
`forgeml server --api-port PORT` serves it in a thread.
"""

from forgeml.api._app import create_app
from forgeml.api._thread import api_in_thread

__all__ = ["api_in_thread", "create_app"]

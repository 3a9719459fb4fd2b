"""The API's access log (`forgeml server --access-log`): uvicorn's, one line a request,
each path cut at its query string.

A query string can carry what must never be written down: a token a client pasted as
`?access_token=`, an OIDC sign-in's `code` and `state`. uvicorn prints the whole target,
so its access handler gets a filter that drops everything from the `?`.
"""

from __future__ import annotations

import copy
import logging
from typing import Any


class PathOnly(logging.Filter):
    """Drops the query string from uvicorn's access records (their third argument is the
    request's path with its query: uvicorn's `get_path_with_query_string`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def access_log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, its access handler filtered by `PathOnly`."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"path_only": {"()": PathOnly}}
    config["handlers"]["access"]["filters"] = ["path_only"]
    return config

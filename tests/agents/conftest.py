from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from forgeml.agents import Budgets, RunState
from forgeml.core.errors import GeneratorError
from forgeml.prompts.client import ChatReply, ToolCall
from tests.tracking.conftest import mlflow_template  # noqa: F401  (the session fixture)


def calls(*pairs: tuple[str, dict[str, Any]] | tuple[str, str]) -> ChatReply:
    """A reply that calls tools: (name, arguments as a dict or raw JSON text), ids c1, c2..."""
    made = [
        ToolCall(f"c{i}", name, args if isinstance(args, str) else json.dumps(args))
        for i, (name, args) in enumerate(pairs, start=1)
    ]
    return ChatReply(None, "tool_calls", 10, 5, made, "scripted")


def text(content: str) -> ChatReply:
    return ChatReply(content, "stop", 10, 5, [], "scripted")


@dataclass
class ScriptedModel:
    """A ChatModel that answers from a list (a ChatReply or an exception to raise)."""

    replies: list[ChatReply | Exception]
    seen: list[dict[str, Any]] = field(default_factory=list)

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatReply:
        self.seen.append({"messages": [dict(m) for m in messages], **options})
        if not self.replies:
            raise GeneratorError("The scripted model has no reply left.")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


@dataclass
class RecordingTracer:
    """A Tracer that keeps its spans in memory."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_span(
        self, name: str, kind: str, parent: Any, attributes: dict[str, Any], inputs: Any = None
    ) -> int:
        with self.lock:
            self.spans.append(
                {"name": name, "kind": kind, "parent": parent, "attributes": dict(attributes),
                 "inputs": inputs, "outputs": None, "error": None, "open": True}
            )  # fmt: skip
            return len(self.spans) - 1

    def end_span(
        self, span: int, outputs: Any = None, attributes: Any = None, error: str | None = None
    ) -> None:
        with self.lock:
            record = self.spans[span]
            record["attributes"].update(attributes or {})
            record.update(outputs=outputs, error=error, open=False)


def new_state(task: str = "What is 2 + 2?") -> RunState:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": task}]
    return RunState(run_id="r1", spec={}, messages=messages)


BUDGETS = Budgets(max_steps=8, max_time_s=60, max_tokens=10_000)


@dataclass
class Web:
    """A loopback HTTP server's routes: `routes[path] = (status, headers, body)`."""

    url: str
    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    got: list[str] = field(default_factory=list)
    posted: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        web: Web = self.server.web  # type: ignore[attr-defined]
        web.got.append(self.path)
        if self.path == "/hang":  # answers only once the test ends
            web.release.wait(10)
        if self.path == "/echo-host":
            web.routes[self.path] = (200, {}, self.headers["Host"].encode())
        self._answer(web)

    def do_POST(self) -> None:
        web: Web = self.server.web  # type: ignore[attr-defined]
        body = self.rfile.read(int(self.headers["Content-Length"]))
        web.posted.append((self.path, dict(self.headers), json.loads(body)))
        self._answer(web)

    def _answer(self, web: Web) -> None:
        status, headers, body = web.routes.get(self.path, (404, {}, b"not found"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web() -> Iterator[Web]:
    """A loopback HTTP server answering the routes the test sets."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.web = Web(f"http://127.0.0.1:{server.server_address[1]}")  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server.web  # type: ignore[attr-defined]
    finally:
        server.web.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class ChatServer:
    """An OpenAI-compatible chat endpoint on loopback that answers from a script."""

    url: str
    replies: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # each request's headers, lower-cased names
    headers: list[dict[str, str]] = field(default_factory=list)

    def say(self, content: str) -> None:
        self.replies.append(_completion({"role": "assistant", "content": content}, "stop"))

    def call(self, name: str, arguments: dict[str, Any], call_id: str = "c1") -> None:
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": call_id, "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        self.replies.append(_completion(message, "tool_calls"))


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "smol",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }  # fmt: skip


class _ChatHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        chat: ChatServer = self.server.chat  # type: ignore[attr-defined]
        chat.requests.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        chat.headers.append({name.lower(): value for name, value in self.headers.items()})
        if chat.replies:
            status, body = 200, chat.replies.pop(0)
        else:
            status, body = 500, {"error": {"message": "The script has no reply left."}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    server.chat = ChatServer(f"http://127.0.0.1:{server.server_address[1]}/v1")  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server.chat  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

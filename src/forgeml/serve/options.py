"""How a model server runs: batching, runtime, limits and the request log (one pydantic model).

The CLI flags of `forgeml serve` are generated from these fields' descriptions, so the
help text and the behaviour cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field

from forgeml.core.devices import DeviceOptions
from forgeml.serve.tool_calls import DEFAULT_MAX_TOOL_CALLS, MAX_TOOL_CALLS_LIMIT

RuntimeName = Literal["torch", "onnx"]


class ServeOptions(DeviceOptions):
    """Options of one model server process (every served model shares them); `device` is
    `DeviceOptions`' field, the one `optimize` and `models compare` read too."""

    model_config = ConfigDict(extra="forbid")

    runtime: RuntimeName = Field(
        default="torch", description="Inference engine: torch (safetensors) or onnx (model.onnx)."
    )
    max_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Most rows run as one batch (1: no batching; default: sized for the "
        "device, 32 on the CPU and 64-256 on a GPU by its memory).",
    )
    max_wait_ms: float = Field(
        default=0.0,
        ge=0,
        le=10_000,
        description="How long the first queued request waits for others to join its batch "
        "(0: a batch is what queued while the previous one ran).",
    )
    max_body_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 above)."
    )
    intra_op_threads: int | None = Field(
        default=None, ge=1, description="Threads one forward pass may use (default: the engine's)."
    )
    # `forgeml serve` owns its process and turns this on; an app embedded in another
    # process leaves that process's collector alone
    freeze_heap: bool = Field(
        default=False,
        description="Once models are loaded, exempt every object alive (models, libraries) "
        "from garbage collections (gc.freeze): a full scan of them stalls every request.",
    )
    reload_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between checks that an alias or latest reference still names "
        "the served version (a moved one is loaded and swapped in).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Another name clients reach the server by (repeat), e.g. its DNS name; a "
        "request naming any other host is refused (DNS rebinding). The bound address, and "
        "the loopback names on loopback, always are.",
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Name to serve the model under (one model only; default its registered name).",
    )
    latency_objective_ms: float = Field(
        default=500.0,
        gt=0,
        le=600_000,
        description="The p99 latency each served model should meet, in ms; exported as "
        "forgeml_latency_objective_seconds for the shipped alert rule to compare with.",
    )
    max_tool_calls: int = Field(
        default=DEFAULT_MAX_TOOL_CALLS,
        ge=1,
        le=MAX_TOOL_CALLS_LIMIT,
        description="Most tool calls one chat reply may make (the forced-call JSON schema's "
        "maxItems); a request may ask for fewer, and parallel_tool_calls false is 1.",
    )
    log_sample_rate: float = Field(
        default=0.0, ge=0, le=1, description="Share of requests written to the request log."
    )
    log_redact: list[str] = Field(
        default_factory=list, description="Fields whose values the request log replaces."
    )
    log_path: Path | None = Field(
        default=None,
        description="Request log file (JSON lines), inside FORGEML_HOME (a relative path is "
        "read from there); default <home>/logs/requests/<name>.jsonl.",
    )
    feedback_window: int = Field(
        default=10_000,
        ge=0,
        le=10_000_000,
        description="Recent requests kept in memory so feedback can name them by request id "
        "(0: none; the request log is searched for the others).",
    )

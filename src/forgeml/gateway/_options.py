"""The gateway's settings: one pydantic model, the single source of each option."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GatewayOptions(BaseModel):
    """How the gateway forwards, limits and records requests."""

    model_config = ConfigDict(extra="forbid")

    request_timeout_s: float = Field(30.0, gt=0, description="Seconds to wait for a replica.")
    connect_timeout_s: float = Field(2.0, gt=0, description="Seconds to wait to connect.")
    retries: int = Field(1, ge=0, le=3, description="Retries on another replica.")
    breaker_failures: int = Field(3, ge=1, description="Failures in a row that open a breaker.")
    breaker_cooldown_s: float = Field(5.0, gt=0, description="Seconds a breaker stays open.")
    max_body_bytes: int = Field(10 * 1024 * 1024, ge=1, description="Largest request body.")
    refresh_s: float = Field(2.0, gt=0, description="Seconds between route table reloads.")
    key_cache_ttl_s: float = Field(
        5.0, ge=0, description="Seconds a verified key is trusted (and a revoke takes to bite)."
    )
    prompt_cache_ttl_s: float = Field(
        5.0,
        ge=0,
        description="Seconds a prompt's alias, split and latest version are trusted (and an "
        "alias move or a new split takes to bite).",
    )
    usage_flush_s: float = Field(2.0, gt=0, description="Seconds between usage flushes.")
    max_shadow_in_flight: int = Field(64, ge=1, description="Shadow copies beyond it are dropped.")
    cold_start_timeout_s: float = Field(
        120.0,
        gt=0,
        description="Seconds a request waits for a deployment scaled to zero to start a replica.",
    )
    seed: int | None = Field(None, description="Seed of the canary split (None: random).")

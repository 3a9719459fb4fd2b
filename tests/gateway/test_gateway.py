from __future__ import annotations

import asyncio
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from forgeml.core.config import Settings
from forgeml.core.store import DeploymentRecord
from forgeml.core.workspace import Workspace
from forgeml.gateway import revoke_key, usage_report
from tests._wait import wait_until
from tests.gateway.conftest import (
    TEST_OPTIONS,
    GatewayUnderTest,
    add_deployment,
    dead_url,
    start_gateway,
)

INFER = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}]}


def test_forwards_kserve_and_predict_routes_unchanged(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r1")
    gw.deploy("fwd", [replica.url])
    key = gw.key(["fwd"])
    answer = gw.post("/v2/models/fwd/infer?trace=1", key, json=INFER)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"replica": "r1", "path": "/v2/models/fwd/infer", "query": "trace=1"}
    predict = gw.client.post(
        "/v1/models/fwd:predict", headers={"x-api-key": key}, json={"instances": [{"a": 1}]}
    )
    assert predict.json()["path"] == "/v1/models/fwd:predict"
    meta = gw.client.get("/v2/models/fwd", headers={"Authorization": f"Bearer {key}"})
    assert meta.json()["path"] == "/v2/models/fwd"
    sent = replica.hits[0]
    assert "authorization" not in sent["headers"] and "x-api-key" not in replica.hits[1]["headers"]
    assert b'"datatype":"FP32"' in sent["body"].replace(b" ", b"")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer fml_000000000000_nope"}, {"x-api-key": "not-a-key"},
     {"Authorization": "Basic dXNlcjpwdw=="}],
)  # fmt: skip
def test_missing_or_unknown_key_gets_401(gw: GatewayUnderTest, headers: dict[str, str]) -> None:
    answer = gw.client.post("/v2/models/fwd/infer", headers=headers, json=INFER)
    assert answer.status_code == 401
    assert "error" in answer.json() and isinstance(answer.json()["error"], str)


def test_openai_route_errors_use_openai_shape(gw: GatewayUnderTest) -> None:
    answer = gw.post("/v1/embeddings", None, json={"model": "x", "input": "hi"})
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "authentication_error"
    bad = gw.post("/v1/embeddings", gw.key(), content=b"{not json")
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_request_error"
    no_model = gw.post("/v1/completions", gw.key(), json={"prompt": "hi"})
    assert no_model.status_code == 422 and "'model'" in no_model.json()["error"]["message"]


def test_revoked_key_is_refused_within_the_cache_ttl(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-rev")
    gw.deploy("rev", [replica.url])
    key = gw.key(["rev"])
    assert gw.post("/v2/models/rev/infer", key, json=INFER).status_code == 200
    revoke_key(gw.workspace, key.split("_")[1])
    # the cost of the cache: a revoked key keeps working until its verdict expires
    assert gw.post("/v2/models/rev/infer", key, json=INFER).status_code == 200
    gw.clock.advance(TEST_OPTIONS.key_cache_ttl_s + 0.01)
    answer = gw.post("/v2/models/rev/infer", key, json=INFER)
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]


def test_key_scoped_elsewhere_gets_403_and_unknown_deployment_404(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-scope")
    gw.deploy("scoped", [replica.url])
    answer = gw.post("/v2/models/scoped/infer", gw.key(["other"]), json=INFER)
    assert answer.status_code == 403 and "not allowed" in answer.json()["error"]
    missing = gw.post("/v2/models/nosuch/infer", gw.key(), json=INFER)
    assert missing.status_code == 404 and "nosuch" in missing.json()["error"]
    assert replica.hits == []


def test_body_over_the_limit_gets_413(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-big")
    gw.deploy("big", [replica.url])
    key = gw.key(["big"])
    answer = gw.post("/v2/models/big/infer", key, content=b"x" * 5000)
    assert answer.status_code == 413 and "4096-byte" in answer.json()["error"]
    chunked = gw.post("/v2/models/big/infer", key, content=iter([b"x" * 3000, b"y" * 3000]))
    assert chunked.status_code == 413
    assert replica.hits == []


def test_rate_limit_gives_429_with_retry_after_then_recovers(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-rate")
    gw.deploy("rate", [replica.url])
    key = gw.key(["rate"], rate_per_s=2, burst=2)
    codes = [gw.post("/v2/models/rate/infer", key, json=INFER).status_code for _ in range(2)]
    refused = gw.post("/v2/models/rate/infer", key, json=INFER)
    assert codes == [200, 200] and refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert "rate limit of 2 requests/s" in refused.json()["error"]
    gw.clock.advance(int(refused.headers["Retry-After"]))
    assert gw.post("/v2/models/rate/infer", key, json=INFER).status_code == 200
    assert len(replica.hits) == 3


def test_daily_quota_gives_429_until_midnight(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-quota")
    gw.deploy("quota", [replica.url])
    key = gw.key(["quota"], daily_quota=3)
    codes = [gw.post("/v2/models/quota/infer", key, json=INFER).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    prefix = key.split("_")[1]
    wait_until(  # past a usage flush: the count now comes from key_usage
        lambda: [r["requests"] for r in usage_report(gw.workspace) if r["prefix"] == prefix] == [3],
        what="the usage flush",
    )
    refused = gw.post("/v2/models/quota/infer", key, json=INFER)
    assert refused.status_code == 429 and "daily quota of 3" in refused.json()["error"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 86400
    assert len(replica.hits) == 3


def test_no_ready_replica_gives_503(gw: GatewayUnderTest) -> None:
    gw.deploy("empty", [])
    gw.deploy("dead", [dead_url()])
    key = gw.key()
    empty = gw.post("/v2/models/empty/infer", key, json=INFER)
    assert empty.status_code == 503 and "no healthy replica" in empty.json()["error"]
    dead = gw.post("/v2/models/dead/infer", key, json=INFER)
    assert dead.status_code == 503 and "failed to connect" in dead.json()["error"]


def test_upstream_timeout_gives_504(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-slow")
    replica.mode, replica.hang_s = "hang", 2.0
    gw.deploy("slow", [replica.url])
    answer = gw.post("/v2/models/slow/infer", gw.key(), json=INFER)
    assert answer.status_code == 504 and "did not answer in time" in answer.json()["error"]


def test_connect_failure_is_retried_on_the_other_replica(gw: GatewayUnderTest) -> None:
    alive, gone = gw.upstream("r-alive"), dead_url()
    gw.deploy("retry", [alive.url, gone])
    key = gw.key()
    answers = [gw.post("/v2/models/retry/infer", key, json=INFER) for _ in range(6)]
    assert [a.status_code for a in answers] == [200] * 6
    assert {a.json()["replica"] for a in answers} == {"r-alive"}
    breaker = gw.app.state.gateway.upstreams.breakers[gone]
    assert breaker.state == "open" and breaker.failures == 2


def test_breaker_cuts_off_a_failing_replica_and_closes_after_cooldown(
    gw: GatewayUnderTest,
) -> None:
    sick, healthy = gw.upstream("r-sick"), gw.upstream("r-healthy")
    sick.mode = "fail"
    gw.deploy("brk", [sick.url, healthy.url])
    key = gw.key()
    answers = [gw.post("/v2/models/brk/infer", key, json=INFER) for _ in range(6)]
    assert [a.json()["replica"] for a in answers] == ["r-healthy"] * 6
    assert len(sick.hits) == 2  # TEST_OPTIONS.breaker_failures: then not tried at all
    sick.mode = "ok"
    gw.clock.advance(TEST_OPTIONS.breaker_cooldown_s)
    after = [gw.post("/v2/models/brk/infer", key, json=INFER).json()["replica"] for _ in range(10)]
    # closed again: the recovered replica takes its share (how much depends on the split's
    # random draws, which the route refreshes of a loaded machine can shift)
    assert after.count("r-sick") >= 1 and len(sick.hits) == 2 + after.count("r-sick")


@pytest.mark.slow
def test_canary_gets_its_weight_of_1000_requests(steady_gw: GatewayUnderTest) -> None:
    gw = steady_gw
    primary, canary = gw.upstream("r-primary"), gw.upstream("r-canary")
    gw.deploy("split", [primary.url], canary=[canary.url], weight=10)
    key = gw.key(["split"])
    total, workers = 1000, 4

    async def send_all() -> list[int]:
        async with httpx.AsyncClient(
            base_url=gw.server.url, headers={"x-api-key": key}, timeout=30
        ) as client:

            async def worker() -> list[int]:
                path, body = "/v1/models/split:predict", {"instances": []}
                return [
                    (await client.post(path, json=body)).status_code
                    for _ in range(total // workers)
                ]

            codes = await asyncio.gather(*(worker() for _ in range(workers)))
        return [code for chunk in codes for code in chunk]

    assert asyncio.run(send_all()) == [200] * total
    sigma = (total * 0.1 * 0.9) ** 0.5
    assert abs(len(canary.hits) - total * 0.1) <= 3 * sigma
    assert len(primary.hits) + len(canary.hits) == total


def test_shadow_gets_a_copy_and_its_failure_never_reaches_the_caller(
    gateway_home: Workspace,
) -> None:
    # a gateway that waits a minute for a replica, so a caller kept waiting on the stuck
    # shadow would run into the client's 10 s timeout instead of getting its answer
    patient = start_gateway(gateway_home, TEST_OPTIONS.model_copy(update={"request_timeout_s": 60}))
    gw = next(patient)
    primary, shadow, stuck = gw.upstream("r-main"), gw.upstream("r-shadow"), gw.upstream("r-stuck")
    stuck.mode, stuck.hang_s = "hang", 60.0
    try:
        gw.deploy("shd", [primary.url], shadow=[shadow.url, stuck.url, dead_url()])
        answer = gw.post("/v2/models/shd/infer", gw.key(), json=INFER)
        assert answer.status_code == 200 and answer.json()["replica"] == "r-main"
        wait_until(lambda: len(shadow.hits) == 1 and len(stuck.hits) == 1, what="shadow copies")
        assert shadow.hits[0]["body"] == primary.hits[0]["body"] == stuck.hits[0]["body"]
        shadow.mode = "fail"
        again = gw.post("/v2/models/shd/infer", gw.key(), json=INFER)
        assert again.status_code == 200 and again.json()["replica"] == "r-main"
    finally:
        stuck.released.set()
        patient.close()


def test_openai_routes_go_to_the_model_named_in_the_body(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-oa")
    gw.deploy("chat", [replica.url])
    key = gw.key(["chat"])
    answer = gw.post("/v1/embeddings", key, json={"model": "chat", "input": "hi"})
    assert answer.json() == {"replica": "r-oa", "path": "/v1/embeddings", "query": ""}
    denied = gw.post("/v1/embeddings", key, json={"model": "secret-model", "input": "hi"})
    assert denied.status_code == 403 and denied.json()["error"]["type"] == "permission_error"
    body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with gw.client.stream(
        "POST", "/v1/chat/completions", headers={"x-api-key": key}, content=_json(body)
    ) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in stream.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and len(lines) == 4
    listed = gw.client.get("/v1/models", headers={"x-api-key": key}).json()
    assert [model["id"] for model in listed["data"]] == ["chat"]


def _json(payload: object) -> bytes:
    import json

    return json.dumps(payload).encode()


def test_usage_is_flushed_per_key_and_deployment(gw: GatewayUnderTest) -> None:
    good, bad = gw.upstream("r-use"), gw.upstream("r-use-bad")
    bad.mode = "fail"
    gw.deploy("use", [good.url])
    gw.deploy("usebad", [bad.url])
    key = gw.key(["use", "usebad"], rate_per_s=1, burst=4)
    prefix = key.split("_")[1]
    codes = [gw.post("/v2/models/use/infer", key, json=INFER).status_code for _ in range(5)]
    codes.append(gw.post("/v2/models/usebad/infer", key, json=INFER).status_code)
    assert codes == [200, 200, 200, 200, 429, 429]
    gw.clock.advance(1.0)  # a token back in the bucket
    assert gw.post("/v2/models/usebad/infer", key, json=INFER).status_code == 503

    def rows() -> dict[str, dict]:
        return {r["deployment"]: r for r in usage_report(gw.workspace) if r["prefix"] == prefix}

    wait_until(
        lambda: sum(r["requests"] + r["rejected"] for r in rows().values()) == 7,
        what="the usage flush",
    )
    use, usebad = rows()["use"], rows()["usebad"]
    assert (use["requests"], use["errors"], use["rejected"]) == (4, 0, 1)
    assert (usebad["requests"], usebad["errors"], usebad["rejected"]) == (1, 1, 1)
    assert use["mean_latency_ms"] > 0


def test_metrics_and_healthz(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-met")
    gw.deploy("met", [replica.url])
    key = gw.key(["met"])
    gw.post("/v2/models/met/infer", key, json=INFER)
    text = gw.client.get("/metrics").text
    prefix = key.split("_")[1]
    assert (
        f'forgeml_gateway_requests_total{{code="200",deployment="met",key_prefix="{prefix}"}}'
        in text
    )
    assert 'forgeml_gateway_request_duration_seconds_bucket{deployment="met"' in text
    assert gw.client.get("/healthz").json()["status"] == "ok"


def test_gateway_keeps_serving_after_bad_requests(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-keep")
    gw.deploy("keep", [replica.url])
    key = gw.key()
    assert gw.post("/v1/models/keep:explain", key, json={}).status_code == 404
    assert gw.client.put("/v2/models/keep/infer", headers={"x-api-key": key}).status_code == 405
    assert gw.post("/v2/models/keep/infer", key, json=INFER).status_code == 200
    assert isinstance(httpx.get(gw.server.url + "/healthz").json(), dict)


def _refusal(answer: httpx.Response) -> tuple[int, object]:
    return answer.status_code, answer.json()


def test_a_key_is_refused_another_projects_deployment_as_an_out_of_scope_one(
    gw: GatewayUnderTest,
) -> None:
    own, other = gw.upstream("r-own-b"), gw.upstream("r-other-a")
    gw.deploy("own-b", [own.url], project="team-b")
    gw.deploy("other-a", [other.url], project="team-a")
    every_b = gw.key(project="team-b")  # `*`: all of team-b's deployments
    prefix = every_b.split("_")[1]
    assert gw.post("/v2/models/own-b/infer", every_b, json=INFER).status_code == 200

    crossed = gw.post("/v2/models/other-a/infer", every_b, json=INFER)
    assert _refusal(crossed) == (
        403, {"error": f"API key {prefix} is not allowed to call deployment 'other-a'."}
    )  # fmt: skip
    # the answer an out-of-scope key gets, on the OpenAI routes too
    out_of_scope = gw.key(["own-b"], project="team-b")
    scoped_prefix = out_of_scope.split("_")[1]
    assert _refusal(gw.post("/v2/models/other-a/infer", out_of_scope, json=INFER)) == (
        403, {"error": f"API key {scoped_prefix} is not allowed to call deployment 'other-a'."}
    )  # fmt: skip
    body = {"model": "other-a", "input": "hi"}
    openai_crossed = gw.post("/v1/embeddings", every_b, json=body).json()
    openai_scoped = gw.post("/v1/embeddings", out_of_scope, json=body).json()
    assert openai_crossed["error"]["message"].replace(prefix, "P") == (
        openai_scoped["error"]["message"].replace(scoped_prefix, "P")
    )
    assert openai_crossed["error"]["code"] == openai_scoped["error"]["code"] == "403"
    models = gw.client.get("/v1/models", headers={"Authorization": f"Bearer {every_b}"})
    assert [model["id"] for model in models.json()["data"]] == ["own-b"]
    assert other.hits == []


def test_a_star_key_is_refused_a_deployment_created_or_moved_into_another_project(
    gw: GatewayUnderTest,
) -> None:
    replica = gw.upstream("r-moving")
    gw.deploy("moving", [replica.url], project="team-b")
    every_b = gw.key(project="team-b")
    assert gw.post("/v2/models/moving/infer", every_b, json=INFER).status_code == 200
    # created after the key (and after its verdict was cached) in another project
    gw.deploy("later-a", [replica.url], project="team-a")
    assert gw.post("/v2/models/later-a/infer", every_b, json=INFER).status_code == 403
    # moved to another project: refused once the route table is reloaded
    with gw.workspace.store.session() as session:
        session.execute(
            update(DeploymentRecord)
            .where(DeploymentRecord.name == "moving")
            .values(project="team-a")
        )
    routes = gw.app.state.gateway
    wait_until(lambda: routes.routes["moving"].project == "team-a", what="the move reloaded")
    answer = gw.post("/v2/models/moving/infer", every_b, json=INFER)
    assert answer.status_code == 403 and "not allowed" in answer.json()["error"]
    assert len(replica.hits) == 1


def test_the_project_check_reads_no_store_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    quiet = {"refresh_s": 600.0, "usage_flush_s": 600.0, "key_cache_ttl_s": 600.0}
    running = contextmanager(start_gateway)(workspace, TEST_OPTIONS.model_copy(update=quiet))
    with closing(workspace), running as gw:
        replica = gw.upstream("r-quiet")
        add_deployment(workspace, "quiet-b", [replica.url], project="team-b")
        add_deployment(workspace, "quiet-a", [replica.url], project="team-a")
        key = gw.key(project="team-b")
        # the first call verifies the key and, past the miss interval, reloads the routes
        gw.clock.advance(2.0)
        assert gw.post("/v2/models/quiet-b/infer", key, json=INFER).status_code == 200
        reads: list[str] = []
        for name in ("session", "read_session"):
            opened = getattr(workspace.store, name)
            counted = lambda *a, _o=opened, _n=name, **k: reads.append(_n) or _o(*a, **k)  # noqa: E731
            monkeypatch.setattr(workspace.store, name, counted)
        for _ in range(5):
            assert gw.post("/v2/models/quiet-b/infer", key, json=INFER).status_code == 200
            assert gw.post("/v2/models/quiet-a/infer", key, json=INFER).status_code == 403
        assert reads == []

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from forgeml.gateway import revoke_key
from tests.gateway.conftest import TEST_OPTIONS, GatewayUnderTest

INFER = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
Labels = tuple[str, str, str]  # deployment, key_prefix, code


def _requests(gw: GatewayUnderTest) -> dict[Labels, float]:
    """`forgeml_gateway_requests_total` from the gateway's /metrics, by its labels."""
    text = gw.client.get("/metrics").text
    (family,) = (
        f for f in text_string_to_metric_families(text) if f.name == "forgeml_gateway_requests"
    )
    return {
        (s.labels["deployment"], s.labels["key_prefix"], s.labels["code"]): s.value
        for s in family.samples
        if s.name == "forgeml_gateway_requests_total"
    }


def _added(before: dict[Labels, float], after: dict[Labels, float]) -> dict[Labels, float]:
    return {
        labels: n - before.get(labels, 0.0)
        for labels, n in after.items()
        if n != before.get(labels, 0.0)
    }


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer fml_000000000000_wrongsecret"}, {"x-api-key": "not-a-key"}],
)  # fmt: skip
def test_401_is_counted_as_unauthenticated(gw: GatewayUnderTest, headers: dict[str, str]) -> None:
    before = _requests(gw)
    answer = gw.client.post("/v2/models/anything/infer", headers=headers, json=INFER)
    assert answer.status_code == 401
    assert _added(before, _requests(gw)) == {("-", "unauthenticated", "401"): 1.0}


def test_401s_on_every_route_are_counted_without_secrets_in_labels(gw: GatewayUnderTest) -> None:
    wrong = "fml_0123456789ab_thisisnotthesecret"
    before = _requests(gw)
    assert (
        gw.post("/v1/chat/completions", None, json={"model": "m", "messages": []}).status_code
        == 401
    )
    assert gw.post("/v1/models/m:predict", wrong, json={}).status_code == 401
    assert gw.client.get("/v1/models", headers={"x-api-key": wrong}).status_code == 401
    # a cached failure (the second try of a wrong key) is counted too
    assert gw.post("/v1/models/m:predict", wrong, json={}).status_code == 401
    assert _added(before, _requests(gw)) == {("-", "unauthenticated", "401"): 4.0}
    text = gw.client.get("/metrics").text
    assert "thisisnotthesecret" not in text and "0123456789ab" not in text
    assert 'forgeml_gateway_request_duration_seconds_count{deployment="-"}' in text


def test_revoked_key_is_counted_as_unauthenticated(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-revoked")
    gw.deploy("revoked", [replica.url])
    key = gw.key(["revoked"])
    prefix = key.split("_")[1]
    assert gw.post("/v2/models/revoked/infer", key, json=INFER).status_code == 200
    revoke_key(gw.workspace, prefix)
    gw.clock.advance(TEST_OPTIONS.key_cache_ttl_s + 0.01)  # a verified key is trusted this long
    before = _requests(gw)
    assert gw.post("/v2/models/revoked/infer", key, json=INFER).status_code == 401
    assert _added(before, _requests(gw)) == {("-", "unauthenticated", "401"): 1.0}
    assert ("revoked", prefix, "200") in before


def test_scope_refusal_is_counted_with_the_keys_prefix(gw: GatewayUnderTest) -> None:
    replica = gw.upstream("r-scoped")
    gw.deploy("scoped", [replica.url])
    key = gw.key(["elsewhere"])
    before = _requests(gw)
    assert gw.post("/v2/models/scoped/infer", key, json=INFER).status_code == 403
    assert _added(before, _requests(gw)) == {("-", key.split("_")[1], "403"): 1.0}

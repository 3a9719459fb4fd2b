"""The control plane answers to its own names and origins only, in JSON only, and sets its
session cookie Secure wherever the client used https: the attacks replayed."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from forgeml.api import api_in_thread
from forgeml.api._accounts import SESSION_COOKIE
from forgeml.api._authz import SingleUser
from forgeml.api._hosts import ServedHosts
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.api._accounts_app import accounts_client, seed
from tests.auth._accounts import PASSWORD

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
CSV = f"name,{SCRIPT}\n{IMG},1\nbob,2\n".encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, int]]:
    """A real server on 127.0.0.1, also reached as forgeml.example; https://ui.example's
    pages may send it changes. The client sends no Origin, as the CLI and the SDK."""
    home = tmp_path_factory.mktemp("hosts") / "home"
    workspace = Workspace(Settings(home=home, user="tester"))
    hosts = ServedHosts(allowed_hosts=["forgeml.example"], allowed_origins=["https://ui.example"])
    served = api_in_thread(workspace, authorizer=SingleUser("tester"), hosts=hosts)
    with served as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client, int(urlsplit(url).port or 0)
    workspace.close()


def _upload(client: httpx.Client, name: str, **headers: str) -> httpx.Response:
    url = f"/api/v1/datasets/{name}/versions"
    return client.post(url, params={"filename": "people.csv"}, content=CSV, headers=headers)


def _json_only(answer: httpx.Response) -> None:
    assert answer.headers["content-type"] == "application/json", answer.text
    assert answer.headers["x-content-type-options"] == "nosniff"


def _names(client: httpx.Client) -> list[str]:
    return [row["dataset"] for row in client.get("/api/v1/datasets").json()]


def test_cve_2025_62593_rebinding_host_refused(server) -> None:
    client, port = server
    for host in (f"attacker.example:{port}", "127.0.0.1.attacker.example", f"[::2]:{port}", ""):
        refused = client.get("/api/v1/datasets", headers={"Host": host})
        assert refused.status_code == 400, host
        _json_only(refused)
        assert "This server is not" in refused.json()["error"]
    assert _upload(client, "rebound", Host=f"attacker.example:{port}").status_code == 400
    assert "rebound" not in _names(client)


def test_cve_2025_62593_a_change_from_another_origin_is_refused(server) -> None:
    client, port = server
    for origin in (
        "http://attacker.example",
        f"http://127.0.0.1:{port + 1}",
        "null",
        "https://ui.example:8443",
    ):
        refused = _upload(client, "forged", Origin=origin)
        assert refused.status_code == 403, origin
        _json_only(refused)
        assert "own pages" in refused.json()["error"]
    assert "forged" not in _names(client)
    # reading is no change: the browser keeps the answer from the other origin's page
    assert client.get("/api/v1/datasets", headers={"Origin": "http://attacker.example"}).is_success


def test_cve_2025_62593_own_origin_allowed(server) -> None:
    client, port = server
    own = {"Origin": f"http://127.0.0.1:{port}"}
    assert _upload(client, "own", **own).status_code == 201
    by_name = {"Host": f"forgeml.example:{port}", "Origin": f"http://forgeml.example:{port}"}
    assert _upload(client, "named", **by_name).status_code == 201
    assert _upload(client, "ui", Origin="https://ui.example").status_code == 201
    for host in (f"localhost:{port}", f"[::1]:{port}", f"FORGEML.example.:{port}"):
        assert client.get("/api/v1/datasets", headers={"Host": host}).status_code == 200, host


def test_cve_2025_62593_no_origin_allowed(server) -> None:
    client, _ = server
    made = _upload(client, "cli")
    assert made.status_code == 201, made.text
    assert "cli" in _names(client)


@pytest.mark.parametrize(
    ("bind", "allowed", "names"),
    [
        ("127.0.0.1", [], {"127.0.0.1", "localhost", "::1"}),
        ("::1", ["[::1]"], {"127.0.0.1", "localhost", "::1"}),
        ("0.0.0.0", ["ml.corp"], {"127.0.0.1", "localhost", "::1", "ml.corp"}),
        ("10.1.2.3", ["ML.corp."], {"10.1.2.3", "ml.corp"}),
    ],
)
def test_the_names_a_server_answers_to(bind: str, allowed: list[str], names: set[str]) -> None:
    assert ServedHosts(bind=bind, allowed_hosts=allowed).names() == names


def test_mlflow_cve_2024_27132_a_script_in_a_dataset_comes_back_as_json_only(server) -> None:
    client, _ = server
    made = _upload(client, "xss")
    assert made.status_code == 201
    answers = [
        made,
        client.get("/api/v1/datasets/xss"),
        client.get("/api/v1/datasets"),
        client.get("/api/v1/datasets/xss/versions"),
    ]
    for answer in answers:
        _json_only(answer)
    assert SCRIPT in str(answers[1].json())  # the column is named as it was uploaded


def test_cve_2023_6568_a_script_in_a_request_comes_back_as_json_only(server) -> None:
    client, port = server
    evil = {
        "Referer": f"http://x/{IMG}",
        "X-Forwarded-Host": IMG,
        "Content-Type": f"text/html; {SCRIPT}",
        "User-Agent": SCRIPT,
    }
    answers = [
        client.get(f"/api/v1/datasets/{IMG}", headers=evil),
        client.get(f"/api/v1/{SCRIPT}", headers=evil),
        client.delete(f"/api/v1/datasets/{SCRIPT}", headers=evil),
        _upload(client, IMG, **evil),
        client.post("/api/v1/auth/login", content=SCRIPT, headers=evil),
        client.get("/api/v1/datasets", headers={**evil, "Host": f"{IMG}:{port}"}),
    ]
    for answer in answers:
        assert answer.status_code >= 400, answer.text
        _json_only(answer)
        assert "error" in answer.json()


def test_only_the_docs_page_is_html(server) -> None:
    client, _ = server
    document = client.get("/openapi.json")
    _json_only(document)
    declared = {
        media
        for operations in document.json()["paths"].values()
        for operation in operations.values()
        for response in operation.get("responses", {}).values()
        for media in response.get("content", {})
    }
    # rows as Arrow (data head/export), raw uploads, an exported bundle (a tar) and a
    # lineage graph drawn as SVG are never a page
    assert declared == {
        "application/json", "text/event-stream", "application/vnd.apache.arrow.stream",
        "application/octet-stream", "application/x-tar", "image/svg+xml",
    }  # fmt: skip
    docs = client.get("/docs")
    assert docs.headers["content-type"].startswith("text/html")
    assert docs.headers["x-content-type-options"] == "nosniff"


def _login(client: TestClient, **headers: str) -> httpx.Response:
    body = {"name": "dan", "password": PASSWORD}
    answer = client.post("/api/v1/auth/login", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert "HttpOnly" in answer.headers["set-cookie"]
    assert "SameSite=strict" in answer.headers["set-cookie"]
    return answer


def test_the_session_cookie_is_secure_over_https(workspace, tmp_path) -> None:
    client, settings, _ = accounts_client(workspace, tmp_path)
    seed(workspace, settings, {"dan": ("developer", "default")})
    with client, TestClient(client.app, base_url="https://localhost") as https:
        assert "Secure" in _login(https).headers["set-cookie"]
        assert "Secure" not in _login(client).headers["set-cookie"]
        # no proxy was trusted: anyone may write the header
        forged = _login(client, **{"X-Forwarded-Proto": "https"})
        assert "Secure" not in forged.headers["set-cookie"]


def test_the_session_cookie_is_secure_behind_a_trusted_proxy_ending_tls(
    workspace, tmp_path
) -> None:
    # TestClient's peer is "testclient": here it plays the proxy the server was told of
    client, settings, _ = accounts_client(workspace, tmp_path, trusted_proxies=["testclient"])
    seed(workspace, settings, {"dan": ("developer", "default")})
    with client:
        proxied = _login(client, **{"X-Forwarded-Proto": "https"})
        assert "Secure" in proxied.headers["set-cookie"]
        assert "Secure" not in _login(client, **{"X-Forwarded-Proto": "http"}).headers["set-cookie"]
        # the browser's origin is the proxy's https one: its cookie-borne changes are its own
        cookie = {"Cookie": f"{SESSION_COOKIE}={proxied.cookies[SESSION_COOKIE]}"}
        https = {"X-Forwarded-Proto": "https", "Origin": "https://localhost", **cookie}
        made = client.post("/api/v1/tokens", json={"name": "laptop"}, headers=https)
        assert made.status_code == 201, made.text
        http = {**https, "X-Forwarded-Proto": "http"}
        assert client.post("/api/v1/tokens", json={"name": "x"}, headers=http).status_code == 403

from __future__ import annotations

import pytest

from forgeml.agents import HttpGetOptions, ToolRefusedError, check_url, http_get_tool
from forgeml.agents.http import fetch
from forgeml.agents.tools import time_limit
from tests.agents.conftest import Web


def loopback(**options: object) -> HttpGetOptions:
    return HttpGetOptions.model_validate({"allow": ["127.0.0.1"], "allow_private": True} | options)


def test_a_page_on_an_allowed_loopback_host_is_fetched(web: Web) -> None:
    web.routes["/doc"] = (200, {"Content-Type": "text/plain; charset=utf-8"}, "héllo".encode())

    reply = fetch(f"{web.url}/doc", loopback())

    assert reply == {
        "url": f"{web.url}/doc",
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "text": "héllo",
        "truncated": False,
    }


def test_loopback_is_refused_unless_allowed(web: Web) -> None:
    web.routes["/doc"] = (200, {}, b"secret admin page")

    with pytest.raises(ToolRefusedError) as raised:
        fetch(f"{web.url}/doc", loopback(allow_private=False))

    assert str(raised.value) == (
        "The host 127.0.0.1 resolves to the non-public address 127.0.0.1; "
        "http_get reaches public addresses only."
    )


@pytest.mark.parametrize(
    ("addresses", "refused"),
    [
        (["169.254.169.254"], "169.254.169.254"),  # cloud metadata (link-local)
        (["10.0.0.5"], "10.0.0.5"),
        (["93.184.215.14", "192.168.1.1"], "192.168.1.1"),  # every address is checked
        (["::1"], "::1"),
        (["::ffff:127.0.0.1"], "::ffff:127.0.0.1"),  # IPv4-mapped loopback
        (["fe80::1%eth0"], "fe80::1%eth0"),
        (["100.64.0.1"], "100.64.0.1"),  # carrier-grade NAT, not global
        (["0.0.0.0"], "0.0.0.0"),
    ],
)
def test_every_non_public_address_a_host_resolves_to_is_refused(
    addresses: list[str], refused: str
) -> None:
    options = HttpGetOptions(allow=["docs.example.org"])

    with pytest.raises(ToolRefusedError, match=f"non-public address {refused}"):
        check_url("https://docs.example.org/x", options, lambda host, port: addresses)


def test_a_public_address_passes_and_is_the_one_connected_to() -> None:
    options = HttpGetOptions(allow=["*.example.org"])

    address = check_url("https://docs.example.org/x", options, lambda h, p: ["93.184.215.14"])

    assert address == "93.184.215.14"


@pytest.mark.parametrize(
    ("url", "sentence"),
    [
        (
            "file:///etc/passwd",
            "http_get fetches http and https URLs only, not 'file:///etc/passwd'.",
        ),
        (
            "gopher://example.org/",
            "http_get fetches http and https URLs only, not 'gopher://example.org/'.",
        ),
        ("http://evil.test/", "The host evil.test is not on http_get's allow-list."),
        (
            "http://example.org.evil.test/",
            "The host example.org.evil.test is not on http_get's allow-list.",
        ),
        (
            "http://user:pw@example.org/",
            "The URL 'http://user:pw@example.org/' has no host, or carries credentials.",
        ),
    ],
)
def test_urls_off_the_allow_list_are_refused(url: str, sentence: str) -> None:
    options = HttpGetOptions(allow=["example.org"])

    with pytest.raises(ToolRefusedError) as raised:
        check_url(url, options, lambda h, p: ["93.184.215.14"])

    assert str(raised.value) == sentence


def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
    web: Web,
) -> None:
    options = HttpGetOptions(allow=["docs.test"], allow_private=True)
    port = web.url.rsplit(":", 1)[1]

    reply = fetch(f"http://docs.test:{port}/echo-host", options, lambda h, p: ["127.0.0.1"])

    assert reply["text"] == f"docs.test:{port}"


def test_a_redirect_on_the_allow_list_is_followed(web: Web) -> None:
    web.routes["/old"] = (302, {"Location": "/new"}, b"")
    web.routes["/new"] = (200, {}, b"moved here")

    reply = fetch(f"{web.url}/old", loopback())

    assert (reply["url"], reply["text"]) == (f"{web.url}/new", "moved here")


@pytest.mark.parametrize(
    ("location", "sentence"),
    [
        ("http://169.254.169.254/latest/meta-data/", "The host 169.254.169.254 is not on"),
        ("file:///etc/passwd", "http_get fetches http and https URLs only"),
        ("http://localhost/admin", "The host localhost is not on"),
    ],
)
def test_each_redirect_hop_is_checked_again(web: Web, location: str, sentence: str) -> None:
    web.routes["/jump"] = (302, {"Location": location}, b"")

    with pytest.raises(ToolRefusedError, match=sentence):
        fetch(f"{web.url}/jump", loopback())


def test_a_redirect_loop_stops_after_max_redirects(web: Web) -> None:
    web.routes["/loop"] = (302, {"Location": "/loop"}, b"")

    with pytest.raises(ToolRefusedError) as raised:
        fetch(f"{web.url}/loop", loopback(max_redirects=3))

    assert str(raised.value) == "GET followed 3 redirects; stopped."


def test_a_body_over_max_bytes_is_cut_and_flagged(web: Web) -> None:
    web.routes["/big"] = (200, {}, b"x" * 50_000)

    reply = fetch(f"{web.url}/big", loopback(max_bytes=1000))

    assert (len(reply["text"]), reply["truncated"]) == (1000, True)


def test_a_server_slower_than_the_timeout_is_given_up(web: Web) -> None:
    with pytest.raises(ToolRefusedError) as raised:
        fetch(f"{web.url}/hang", loopback(timeout_s=0.2))

    assert str(raised.value) == f"GET {web.url}/hang did not finish within its 0.2 s."


def test_the_runs_time_left_caps_the_tools_own_timeout(web: Web) -> None:
    with time_limit(0.2), pytest.raises(ToolRefusedError) as raised:
        fetch(f"{web.url}/hang", loopback(timeout_s=30))

    assert str(raised.value) == f"GET {web.url}/hang did not finish within its 0.2 s."


def test_the_tool_takes_a_url_and_answers_the_page(web: Web) -> None:
    web.routes["/doc"] = (200, {}, b"page")
    tool = http_get_tool(loopback())

    arguments = tool.validate(f'{{"url": "{web.url}/doc"}}')

    assert tool.schema()["function"]["parameters"]["required"] == ["url"]
    assert tool.function(**arguments)["text"] == "page"

"""SSRF replays (TorchServe CVE-2023-43654; MLflow's webhook URL checks) against
`forgeml.core.netguard`, the guard every URL a forgeml server fetches goes through."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
import pytest

from forgeml.core import netguard
from forgeml.core.errors import UnsafeUrlError
from forgeml.core.store import AlertRecord
from forgeml.monitor.alerts._channels import WebhookChannel, WebhookChannelSpec
from tests.security.conftest import Site

PUBLIC = "93.184.215.14"
# the test's own server may be reached, nothing else private
LOOPBACK_SITE = netguard.UrlPolicy(who="the test", allow_networks=("127.0.0.1/32",))


def never_resolves(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} is an address and must not be sent to the resolver")


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),  # cloud metadata
        ("http://2130706433/", "127.0.0.1"),  # decimal
        ("http://0x7f000001/", "127.0.0.1"),  # hexadecimal
        ("http://0177.0.0.1/", "127.0.0.1"),  # octal
        ("http://0x7f.1/", "127.0.0.1"),  # mixed short form
        ("http://127.1/", "127.0.0.1"),  # short form
        ("http://0/", "0.0.0.0"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),  # IPv4-mapped IPv6
        ("http://[::ffff:a9fe:a9fe]/", "::ffff:a9fe:a9fe"),  # mapped metadata, in hex
        ("http://[64:ff9b::a9fe:a9fe]/", "64:ff9b::a9fe:a9fe"),  # NAT64 of 169.254.169.254
        ("http://[2002:7f00:1::]/", "2002:7f00:1::"),  # 6to4 of 127.0.0.1
        ("http://[::1]:8080/", "::1"),
        ("http://[fe80::1%25eth0]/", "fe80::1"),
        ("http://10.0.0.1./", "10.0.0.1"),  # trailing dot
    ],
)
def test_cve_2023_43654_every_spelling_of_a_private_address_is_refused(
    url: str, address: str
) -> None:
    with pytest.raises(UnsafeUrlError) as raised:
        netguard.check_url(url, netguard.UrlPolicy(), never_resolves)

    assert f"resolves to the non-public address {address};" in str(raised.value)


@pytest.mark.parametrize(
    "answers",
    [["127.0.0.1"], [PUBLIC, "10.1.2.3"], ["::ffff:192.168.0.1"], ["100.64.0.1"]],
)
def test_cve_2023_43654_a_name_resolving_to_any_private_address_is_refused(
    answers: list[str],
) -> None:
    with pytest.raises(UnsafeUrlError, match="non-public address"):
        netguard.check_url(
            "https://models.example.org/m.mar", netguard.UrlPolicy(), lambda h, p: answers
        )


@pytest.mark.parametrize(
    ("url", "sentence"),
    [
        (
            "file:///etc/passwd",
            "forgeml fetches http and https URLs only, not 'file:///etc/passwd'.",
        ),
        ("gopher://127.0.0.1:6379/_INFO", "forgeml fetches http and https URLs only"),
        ("dict://127.0.0.1:11211/stats", "forgeml fetches http and https URLs only"),
        ("http://user:pw@example.org/", "has no host, or carries credentials."),
        ("http:///nohost", "has no host, or carries credentials."),
        ("http://example.org:99999/", "does not parse."),
    ],
)
def test_cve_2023_43654_schemes_and_urls_beyond_http_are_refused(url: str, sentence: str) -> None:
    with pytest.raises(UnsafeUrlError, match=re.escape(sentence)):
        netguard.check_url(url, netguard.UrlPolicy(), lambda h, p: [PUBLIC])


def test_cve_2023_43654_a_public_address_passes() -> None:
    address = netguard.check_url(
        "https://models.example.org/m", netguard.UrlPolicy(), lambda h, p: [PUBLIC]
    )

    assert address == PUBLIC


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706434:{port}/",  # 127.0.0.2, decimal
        "http://[::ffff:127.0.0.2]:{port}/",
        "http://0x7f.2:{port}/",
        "file:///etc/passwd",
    ],
)
def test_cve_2023_43654_each_redirect_hop_is_checked_again(site: Site, target: str) -> None:
    site.routes["/jump"] = (302, {"Location": target.format(port=site.port)}, b"")

    with (
        netguard.guarded_client(LOOPBACK_SITE, max_redirects=3) as client,
        pytest.raises(UnsafeUrlError),
    ):
        client.get(f"{site.url}/jump")

    assert site.seen == [("GET", "/jump", f"127.0.0.1:{site.port}")]


def test_cve_2023_43654_a_redirect_to_an_allowed_address_is_followed(site: Site) -> None:
    site.routes["/jump"] = (302, {"Location": "/landing"}, b"")
    site.routes["/landing"] = (200, {}, b"here")

    with netguard.guarded_client(LOOPBACK_SITE, max_redirects=3) as client:
        reply = client.get(f"{site.url}/jump")

    assert (reply.status_code, reply.text, str(reply.url)) == (200, "here", f"{site.url}/landing")


def test_cve_2023_43654_dns_rebinding_connects_to_the_checked_address_only(site: Site) -> None:
    # the first answer passes the check; every later one names the metadata service
    answers = iter([["127.0.0.1"]])
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers, ["169.254.169.254"])

    site.routes["/model"] = (200, {}, b"weights")
    with netguard.guarded_client(LOOPBACK_SITE, rebinding) as client:
        reply = client.get(f"http://rebind.invalid:{site.port}/model")

    # one resolution, the connection to its answer (rebind.invalid resolves nowhere else)
    assert (reply.text, asked) == ("weights", ["rebind.invalid"])
    assert site.seen == [("GET", "/model", f"rebind.invalid:{site.port}")]
    with pytest.raises(UnsafeUrlError, match=r"non-public address 169\.254\.169\.254"):
        netguard.check_url(f"http://rebind.invalid:{site.port}/", LOOPBACK_SITE, rebinding)


def test_cve_2023_43654_proxies_from_the_environment_are_not_used(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://169.254.169.254:3128")
    site.routes["/ok"] = (200, {}, b"direct")

    with netguard.guarded_client(LOOPBACK_SITE) as client:
        assert client.get(f"{site.url}/ok").text == "direct"


def _alert() -> AlertRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return AlertRecord(
        id="a1", fingerprint="f" * 16, rule="Broken", labels={"model": "m"},
        annotations={"summary": "m fails"}, severity="critical", state="firing", value=1.0,
        started_at=now, fired_at=now, source="forgeml", updated_at=now,
    )  # fmt: skip


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/hook",
        "http://2130706433:{port}/hook",
        "http://[::ffff:127.0.0.1]:{port}/hook",
        "http://169.254.169.254/latest/meta-data/iam/",
    ],
)
def test_mlflow_webhook_checks_a_webhook_to_a_private_address_is_never_sent(
    site: Site, url: str
) -> None:
    spec = WebhookChannelSpec(name="hook", type="webhook", url=url.format(port=site.port))

    with pytest.raises(UnsafeUrlError, match="The webhook hook reaches public addresses only"):
        WebhookChannel(spec, "").send(_alert())

    assert site.seen == []


def test_mlflow_webhook_checks_a_webhook_that_redirects_is_a_failed_delivery(site: Site) -> None:
    site.routes["/hook"] = (307, {"Location": f"{site.url}/internal-admin"}, b"")
    spec = WebhookChannelSpec(
        name="hook", type="webhook", url=f"{site.url}/hook", allow_private=True
    )

    with pytest.raises(httpx.HTTPStatusError):
        WebhookChannel(spec, "").send(_alert())

    assert [path for _, path, _ in site.seen] == ["/hook"]


def test_mlflow_webhook_checks_an_allowed_private_webhook_is_delivered(site: Site) -> None:
    site.routes["/hook"] = (200, {}, b"")
    spec = WebhookChannelSpec(
        name="hook", type="webhook", url=f"{site.url}/hook", allow_private=True
    )

    WebhookChannel(spec, "").send(_alert())

    assert site.seen == [("POST", "/hook", f"127.0.0.1:{site.port}")]

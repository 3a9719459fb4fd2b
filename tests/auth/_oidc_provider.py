"""A real OpenID Connect provider on loopback for the OIDC tests, and a browser without a screen.

The provider is panva's `oidc-provider` (npm, OpenID Certified; pinned in oidc_provider/
package-lock.json, installed by `.ci/run` with `npm ci`), run by oidc_provider/provider.mjs
with the clients and users below. PyPI's `oidc-provider-mock` was the other candidate: it is
built on authlib, the library forgeml's client uses, so a shared mistake would pass unseen,
and it signs in without a password form.
"""

from __future__ import annotations

import json
import re
import selectors
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx
import pytest

PROVIDER_DIR = Path(__file__).parent / "oidc_provider"
REDIRECT_URI = "http://127.0.0.1:8765/api/v1/auth/oidc/callback"
CLIENTS = {"forgeml": "forgeml-test-secret", "other-app": "other-app-test-secret"}
USERS = {
    "alice": {
        "password": "correct horse battery staple",
        "email": "alice@example.org",
        "name": "Alice Liddell",
        "groups": ["ml-engineers", "vision-leads"],
    },
    "bob": {"password": "hunter2 hunter2", "email": "bob@example.org", "name": "Bob", "groups": []},
}


@dataclass(frozen=True)
class Provider:
    issuer: str


def _skip_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed: the OIDC tests need it to run the test provider"
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        return f"oidc-provider is not installed: run `npm ci --prefix {PROVIDER_DIR}`"
    return None


def run_provider(tmp_dir: Path) -> Iterator[Provider]:
    """Start provider.mjs on 127.0.0.1 and yield its issuer; stop it after."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    config = {
        "clients": [
            {
                "client_id": client_id,
                "client_secret": secret,
                "redirect_uris": [REDIRECT_URI],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
            }
            for client_id, secret in CLIENTS.items()
        ],
        "users": USERS,
    }
    config_path = tmp_dir / "provider.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    process = subprocess.Popen(
        ["node", str(PROVIDER_DIR / "provider.mjs"), str(config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield Provider(issuer=_read_issuer(process))
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _read_issuer(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=30):
            raise RuntimeError("the OIDC test provider did not start within 30 s")
    line = process.stdout.readline().split()
    if line[:1] != ["issuer"]:
        raise RuntimeError(f"the OIDC test provider did not start: {line}")
    return line[1]


def browser_sign_in(authorization_url: str, login: str, password: str) -> dict[str, str]:
    """Follow `authorization_url` as a browser would: sign in and consent at the provider's
    forms, and return the query of the redirect to `REDIRECT_URI` (which is not fetched)."""
    url = authorization_url
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        response = browser.get(url)
        for _ in range(20):
            if response.is_redirect:
                url = urljoin(url, response.headers["location"])
                if url.startswith(REDIRECT_URI):
                    return dict(parse_qsl(urlsplit(url).query))
                response = browser.get(url)
                continue
            if response.status_code != 200:
                raise AssertionError(f"{url} answered {response.status_code}: {response.text}")
            match = re.search(r'<form method="post" action="([^"]+)"', response.text)
            assert match, response.text
            url = urljoin(url, unescape(match.group(1)))
            form = {"login": login, "password": password} if 'name="login"' in response.text else {}
            response = browser.post(url, data=form)
    raise AssertionError("the sign-in did not come back to the redirect URI")

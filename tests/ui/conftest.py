"""The UI served for real (uvicorn on a free loopback port) over the seeded workspace with
accounts, a Chromium driven by Playwright (Debian's /usr/bin/chromium, never a download),
and a saved sign-in per role."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from forgeml.api import api_in_thread
from forgeml.api._accounts import AccountsAuthorizer
from forgeml.auth import AuthSettings
from forgeml.core.workspace import Workspace
from forgeml.ui import create_app
from tests.ui._seed import PASSWORD, ROLES, seeded_home

CHROMIUM = Path("/usr/bin/chromium")
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@dataclass
class Served:
    url: str
    workspace: Workspace
    settings: AuthSettings


PAGE_TIMEOUT = httpx.Timeout(120.0, connect=10.0)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("ui")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        workspace, settings = seeded_home(tmp_path_factory, root)
        authorizer = AccountsAuthorizer(workspace, settings)
        try:
            with api_in_thread(workspace, authorizer=authorizer, app_factory=create_app) as url:
                yield Served(url, workspace, settings)
        finally:
            workspace.close()


def signed_in(url: str, name: str) -> httpx.Client:
    """An HTTP client signed in as `name` through the `/login` form (its CSRF token too)."""
    # a page that loads a model (calibration, explanations) may take seconds on a loaded
    # machine, and the pages share one served app: httpx's 5 s would fail them, not the code
    client = httpx.Client(base_url=url, timeout=PAGE_TIMEOUT)
    client.get("/login")
    token = client.cookies["forgeml_csrf"]
    answer = client.post(
        "/login", data={"name": name, "password": PASSWORD, "csrf_token": token, "next": "/"}
    )
    assert answer.status_code == 303, answer.text
    return client


@pytest.fixture(scope="session")
def clients(served: Served) -> Iterator[dict[str, httpx.Client]]:
    """An HTTP client signed in per account (`ada`, `mia`, `vic`)."""
    signed = {name: signed_in(served.url, name) for name in ROLES}
    yield signed
    for client in signed.values():
        client.close()


@dataclass
class Browser:
    """Chromium with one saved sign-in per role; `page(role)` opens a page as that role and
    records every console error and failed request it sees."""

    browser: Any
    url: str
    states: dict[str, Path]
    errors: list[str] = field(default_factory=list)

    def page(self, role: str | None) -> Any:
        state = str(self.states[role]) if role else None
        context = self.browser.new_context(
            base_url=self.url, storage_state=state, viewport={"width": 1280, "height": 900}
        )
        page = context.new_page()
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        return page


# one module's: Playwright's sync API runs its event loop in this thread while it is open,
# so a later file's `asyncio.run` (the gateway's and serve's tests) would find it running
@pytest.fixture(scope="module")
def browser(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium is missing at {CHROMIUM} (Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    states = tmp_path_factory.mktemp("states")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            saved = {}
            for name, role in ROLES.items():
                context = chromium.new_context(base_url=served.url)
                page = context.new_page()
                page.goto("/login")
                page.fill("input[name=name]", name)
                page.fill("input[name=password]", PASSWORD)
                page.click("button[type=submit]")
                page.wait_for_url(f"{served.url}/")
                saved[role] = states / f"{role}.json"
                context.storage_state(path=str(saved[role]))
                context.close()
            yield Browser(chromium, served.url, saved)
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def screenshot(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Any, str], None]:
    """Save a page's screenshot as NAME.png: into docs/screenshots (committed with the UI)
    when FORGEML_SCREENSHOTS=1 (`make screenshots`), else into a temporary folder, so a
    plain `make test` takes them all but leaves the checkout as it was."""
    folder = (
        DOCS_SCREENSHOTS
        if os.environ.get("FORGEML_SCREENSHOTS") == "1"
        else tmp_path_factory.mktemp("screenshots")
    )
    folder.mkdir(parents=True, exist_ok=True)

    def save(page: Any, name: str) -> None:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=False)
        assert path.stat().st_size > 0, f"no screenshot of {name}"

    return save

"""The UI in a real Chromium, per role: pages load without a console error (the CSP would
report any inline script), charts draw, the runs table filters, a job's log streams, and
only a role that may cancel sees and uses the button. Screenshots go to docs/screenshots."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.ui._seed import FEEDBACK_WINDOW, LABELLED, XSS
from tests.ui.conftest import Browser

pytestmark = pytest.mark.slow  # a Chromium and a trained workspace; `make test` runs them

Shot = Callable[[Any, str], None]
# page, what must be on it, the screenshot's name
PAGES = [
    ("/", "#recent-runs", "home"),
    ("/runs", "#runs-table", "runs"),
    ("/jobs", "#jobs-table", "jobs"),
    ("/datasets", "#datasets-table", "datasets"),
    ("/datasets/notes", "#preview-table", "dataset"),
    ("/datasets/notes@v1/diff?to=notes@v2", "#diff-columns", "dataset-diff"),
    ("/models", "#models-table", "models"),
    ("/models/adult-mlp", "#promotion-history", "model"),
    ("/lineage/adult-mlp@v1", "#lineage-nodes", "lineage"),
    ("/deployments", "#deployments-table", "deployments"),
    ("/monitoring", "#alerts-table", "monitoring"),
    ("/cost?by=job", "#cost-table", "cost"),
    ("/audit", "#audit-verified", "audit"),
    ("/keys", "#keys-table", "keys"),
    ("/admin", "#users-table", "admin"),
]


@pytest.fixture
def browser_errors(browser: Browser) -> Browser:
    browser.errors.clear()
    return browser


@pytest.mark.parametrize(("path", "selector", "name"), PAGES)
def test_every_page_loads_for_an_admin_without_console_errors(
    browser_errors: Browser, screenshot: Shot, path: str, selector: str, name: str
) -> None:
    page = browser_errors.page("admin")
    page.goto(path)
    page.wait_for_selector(selector)
    page.wait_for_load_state("networkidle")
    screenshot(page, name)
    assert browser_errors.errors == []
    page.context.close()


def test_a_runs_curves_are_drawn_from_the_servers_points(
    browser_errors: Browser, screenshot: Shot
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/runs?name=adult-mlp&status=FINISHED&sort=started_at&order=asc")
    page.click(".run-row a")
    page.wait_for_selector("figure.curve canvas")
    metrics = page.eval_on_selector_all("figure.curve", "els => els.map(e => e.dataset.metric)")
    assert "train_loss" in metrics
    screenshot(page, "run")
    assert browser_errors.errors == []
    page.context.close()


def test_two_runs_compare_side_by_side(browser_errors: Browser, screenshot: Shot) -> None:
    page = browser_errors.page("viewer")
    page.goto("/runs?name=adult-mlp&status=FINISHED")
    boxes = page.locator(".run-row input[type=checkbox]")
    assert boxes.count() == 2
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.click("#compare-runs")
    page.wait_for_selector("figure.curve canvas")
    assert "optimizer.lr" in page.inner_text("#config-diff")
    screenshot(page, "compare")
    assert browser_errors.errors == []
    page.context.close()


def test_filtering_the_runs_table_asks_the_server(browser_errors: Browser) -> None:
    page = browser_errors.page("viewer")
    page.goto("/runs")
    assert page.locator(".run-row").count() == 4
    page.fill("input[name=name]", "adult-small")
    page.click("#apply-filter")
    expect(page.locator(".run-row")).to_have_count(1)  # waits; no eval under the CSP
    assert "adult-small" in page.inner_text("#runs-table")
    assert "name=adult-small" in page.url  # pushed: the filtered table has its own address
    page.select_option("select[name=status]", "FAILED")
    page.wait_for_selector("#no-runs")
    assert browser_errors.errors == []
    page.context.close()


def test_a_jobs_log_streams_until_it_ends(browser_errors: Browser, screenshot: Shot) -> None:
    page = browser_errors.page("viewer")
    page.goto("/jobs?state=SUCCEEDED")
    page.click(".job-row a")
    page.wait_for_selector("#job-log-end:has-text('Ended SUCCEEDED')")
    assert "hello from the job" in page.inner_text("#job-log")
    screenshot(page, "job")
    assert browser_errors.errors == []
    page.context.close()


def test_a_viewer_sees_no_cancel_button(browser_errors: Browser) -> None:
    page = browser_errors.page("viewer")
    page.goto("/jobs?state=PENDING")
    page.click(".job-row a >> text=waiting-one")
    page.wait_for_selector("#job-state")
    assert page.locator("#cancel-job").count() == 0
    page.context.close()


def test_a_maintainer_cancels_a_job_and_may_retry_it(browser_errors: Browser) -> None:
    page = browser_errors.page("maintainer")
    page.goto("/jobs?state=PENDING")
    page.click(".job-row a >> text=waiting-one")
    page.click("#cancel-job")
    page.wait_for_selector("#job-state >> text=CANCELLED")
    assert page.locator("#retry-job").count() == 1
    page.reload()
    assert "CANCELLED" in page.inner_text("#job-state")
    assert browser_errors.errors == []
    page.context.close()


def test_a_cells_markup_never_runs_in_the_page(browser_errors: Browser) -> None:
    page = browser_errors.page("viewer")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto("/datasets/notes")
    page.wait_for_selector("#preview-table")
    assert XSS in page.inner_text("#preview-table")
    assert page.locator("#preview-table img").count() == 0
    assert dialogs == []
    page.context.close()


def test_signing_in_and_out_through_the_form(browser_errors: Browser, screenshot: Shot) -> None:
    page = browser_errors.page(None)
    page.goto("/models")
    assert re.search(r"/login\?next=/models$", page.url)
    screenshot(page, "login")
    page.fill("input[name=name]", "vic")
    page.fill("input[name=password]", "correct horse battery staple")
    page.click("button[type=submit]")
    page.wait_for_selector("#models-table")
    page.click("text=Sign out")
    page.wait_for_url(re.compile(r"/login"))
    page.goto("/models")
    assert "/login" in page.url
    page.context.close()


def test_a_maintainer_acknowledges_an_alert_a_viewer_cannot(browser_errors: Browser) -> None:
    viewer = browser_errors.page("viewer")
    viewer.goto("/monitoring?state=firing")
    viewer.wait_for_selector("#alerts-table")
    assert viewer.locator("button.ack").count() == 0
    viewer.context.close()
    page = browser_errors.page("maintainer")
    page.goto("/monitoring?state=firing")
    buttons = page.locator("button.ack")
    assert buttons.count() == 2
    buttons.first.click()
    page.wait_for_selector("text=acknowledged by mia")
    assert page.locator("button.ack").count() == 1
    assert browser_errors.errors == []
    page.context.close()


def test_the_lineage_graph_and_the_model_card_show_for_a_viewer(
    browser_errors: Browser, screenshot: Shot
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/models/adult-mlp")
    page.click("a.lineage-link >> nth=0")
    page.wait_for_selector("#lineage-nodes")
    graph = page.locator("#lineage-graph")
    expect(graph).to_be_visible()
    page.wait_for_function("document.getElementById('lineage-graph').complete")
    assert graph.evaluate("img => img.naturalWidth") > 100  # the SVG drew, under the CSP
    page.goto("/models/adult-mlp?version=1")
    expect(page.locator("#model-card h2").first).to_be_visible()
    expect(page.locator("#fairness-table")).to_contain_text("dp_diff")
    page.locator("#fairness-table").evaluate("t => t.scrollIntoView({block: 'start'})")
    screenshot(page, "model-card")
    assert browser_errors.errors == []
    page.context.close()


def test_the_monitoring_page_charts_drift_per_feature_over_time(
    browser_errors: Browser, screenshot: Shot
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/monitoring")
    page.fill("#drift-form input[name=model]", "adult-mlp")
    page.fill("#drift-form input[name=window]", "300")
    page.click("#drift-form button[type=submit]")
    page.wait_for_selector("#drift-chart canvas")
    legend = page.eval_on_selector_all(
        "#drift-chart .u-legend .u-series .u-label", "els => els.map(e => e.textContent)"
    )
    assert "age" in legend and "threshold" in legend
    expect(page.locator("#drift-table tr[data-feature=age]")).to_contain_text("yes")
    screenshot(page, "monitoring-drift")
    assert browser_errors.errors == []


def test_a_viewer_predicts_and_explains_a_row_on_the_model_page(
    browser_errors: Browser, screenshot: Shot
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/models/adult-mlp")
    expect(page.locator("#explain-row")).to_contain_text('"age"')  # a training row
    page.click("#explain-form button[type=submit]")
    page.wait_for_selector("#explain-table", timeout=120_000)  # Kernel SHAP: seconds
    assert browser_errors.errors == []
    page.wait_for_selector("#explain-chart canvas")  # ECharts drew (this build: a canvas)
    drawn = page.locator("#explain-chart canvas").evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }"
    )
    assert drawn > 1000  # painted pixels: the bars and axes, not an empty canvas
    expect(page.locator("#explain-prediction")).to_contain_text("probability of")
    assert page.locator("#explain-table tbody tr").count() == 14
    page.locator("#explain-result").evaluate("r => r.scrollIntoView({block: 'start'})")
    screenshot(page, "model-explain")
    page.fill("#explain-row", "{not json")
    page.click("#explain-form button[type=submit]")
    expect(page.locator("#explain-error")).to_contain_text("The row is not JSON")
    # the refusal is a 400 the page shows in place; Chromium logs the failed request itself
    assert [e for e in browser_errors.errors if "400" not in e] == []
    page.context.close()


def test_the_monitoring_page_shows_accuracy_from_feedback(
    browser_errors: Browser, screenshot: Shot
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/monitoring")
    page.fill("#drift-form input[name=model]", "adult-mlp")
    page.fill("#drift-form input[name=window]", str(FEEDBACK_WINDOW))
    page.click("#drift-form button[type=submit]")
    row = page.locator("#accuracy-table tbody tr")
    expect(row).to_contain_text("adult-mlp@v1")
    # the latest window of 10 holds 3 wrong predictions
    assert row.locator("td").all_inner_texts()[2:4] == [str(FEEDBACK_WINDOW), "0.7"]
    page.wait_for_selector("#accuracy-chart canvas")
    legend = page.eval_on_selector_all(
        "#accuracy-chart .u-legend .u-series .u-label", "els => els.map(e => e.textContent)"
    )
    assert legend[1:] == ["measured accuracy", "estimated accuracy", "validation accuracy"]
    measured = page.locator("#accuracy-windows tbody tr td:nth-child(4)").all_inner_texts()
    assert measured == ["1", "0.9", "0.8", "0.7"]
    assert LABELLED == 4 * FEEDBACK_WINDOW
    page.locator("#accuracy-heading").evaluate("h => h.scrollIntoView({block: 'start'})")
    screenshot(page, "monitoring-accuracy")
    page.fill("#drift-form input[name=model]", "adult-small")
    page.click("#drift-form button[type=submit]")
    expect(page.locator("#accuracy-none")).to_contain_text("No feedback yet")
    expect(page.locator("#drift-error")).to_contain_text("No request log")
    assert browser_errors.errors == []
    page.context.close()


def test_the_run_and_model_pages_show_fairness_per_group(
    browser_errors: Browser, screenshot: Shot
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/models/adult-mlp?version=1")
    groups = page.locator("#fairness-groups table[data-split=validation][data-column=sex]")
    expect(groups).to_be_visible()
    assert groups.locator("tbody tr").count() == 2  # the Adult data's two values of sex
    assert groups.locator("th").all_inner_texts() == [
        "Group", "Count", "Accuracy", "TPR", "FPR", "Selection rate"
    ]  # fmt: skip
    expect(groups.locator("caption")).to_contain_text("demographic parity difference")
    page.click("#fairness-groups >> xpath=preceding-sibling::h3[1]/a")
    page.wait_for_selector("#fairness-groups table[data-split=test][data-column=race]")
    assert "/runs/" in page.url
    page.locator("#fairness-groups").evaluate("t => t.scrollIntoView({block: 'start'})")
    screenshot(page, "run-fairness")
    assert browser_errors.errors == []
    page.context.close()


@pytest.mark.parametrize(
    ("method", "top", "background"),
    [("kernel_shap", "5", "20"), ("integrated_gradients", "3", "10")],
)
def test_the_explain_form_explains_by_each_method(
    browser_errors: Browser, method: str, top: str, background: str
) -> None:
    page = browser_errors.page("viewer")
    page.goto("/models/adult-mlp")
    assert page.locator("#explain-method option").all_inner_texts() == [
        "kernel_shap", "integrated_gradients"
    ]  # fmt: skip
    page.select_option("#explain-method", method)
    page.fill("#explain-top", top)
    page.fill("#explain-background", background)
    page.click("#explain-form button[type=submit]")
    page.wait_for_selector("#explain-table", timeout=120_000)
    expect(page.locator("#explain-prediction")).to_contain_text(f"by {method}")
    assert page.locator("#explain-table tbody tr").count() == int(top)
    page.wait_for_selector("#explain-chart canvas")
    assert browser_errors.errors == []
    page.context.close()

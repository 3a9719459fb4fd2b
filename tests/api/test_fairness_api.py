"""`GET /api/v1/runs/{ref}/fairness`: the per-group tables a run keeps (fairness.json), in
agreement with the run's fairness metrics and with fairlearn's definitions."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.governance.fairness_report import fairness_tables
from forgeml.train.fairness import fairness_report
from tests.api.conftest import api_client
from tests.train.conftest import copy_home, trained_adult_template


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        root = tmp_path_factory.mktemp("fairness")
        home = copy_home(trained_adult_template(tmp_path_factory), root / "home")
        workspace = Workspace(Settings(home=home, user="tester"))
        with api_client(workspace) as client:
            yield client
        workspace.close()


def test_a_runs_tables_agree_with_its_metrics_and_fairlearns_definitions(
    api: TestClient,
) -> None:
    run = api.get("/api/v1/runs/adult-small").json()
    answer = api.get(f"/api/v1/runs/{run['run_id'][:8]}/fairness")

    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["run_id"] == run["run_id"]
    tables = {(t["split"], t["column"]): t for t in found["tables"]}
    assert set(tables) == {(s, c) for s in ("validation", "test") for c in ("race", "sex")}
    for (split, column), table in tables.items():
        prefix = "test_" if split == "test" else ""
        for measure in ("dp_diff", "dp_ratio", "eo_diff", "eo_ratio"):
            # a ratio with every group's rate 0 is undefined: no metric, and None here
            recorded = run["metrics"].get(f"{prefix}fairness/{column}/{measure}")
            assert table[measure] == (recorded and pytest.approx(recorded))
        rates = [g["selection_rate"] for g in table["groups"]]
        assert table["dp_diff"] == pytest.approx(max(rates) - min(rates))
        tpr = [g["tpr"] for g in table["groups"]]
        fpr = [g["fpr"] for g in table["groups"]]
        assert table["eo_diff"] == pytest.approx(max(max(tpr) - min(tpr), max(fpr) - min(fpr)))
    sexes = tables[("validation", "sex")]["groups"]
    assert [g["group"] for g in sexes] == sorted(g["group"] for g in sexes)
    race = sum(g["count"] for g in tables[("validation", "race")]["groups"])
    assert sum(g["count"] for g in sexes) == race > 0  # every validation row, once a column


@pytest.mark.parametrize(
    ("ref", "sentence"),
    [
        ("nosuch", "nosuch"),
        ("FAILED", "keeps no fairness report"),  # the run that failed before evaluating
    ],
)
def test_a_run_without_a_report_is_a_404_json_sentence(
    api: TestClient, ref: str, sentence: str
) -> None:
    if ref == "FAILED":
        failed = api.get("/api/v1/runs", params={"status": "FAILED"}).json()
        ref = failed[0]["run_id"]
    answer = api.get(f"/api/v1/runs/{ref}/fairness")

    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    assert sentence in answer.json()["error"]


def test_a_mitigation_runs_report_reads_as_tables_before_and_after() -> None:
    rng = np.random.default_rng(0)
    y_true, before, after = (rng.integers(0, 2, 40) for _ in range(3))
    groups = {"sex": ["a", "b"] * 20}
    kept = {"source": "m@v1", "sensitive": "sex", "before": {}, "after": {}}
    for stage, predicted in (("before", before), ("after", after)):
        table = fairness_report(y_true, predicted, groups).table()
        kept[stage] = {"validation": {"accuracy": float(np.mean(predicted == y_true)), **table}}

    tables = fairness_tables(kept)

    assert [(t["stage"], t["split"], t["column"]) for t in tables] == [
        ("before", "validation", "sex"),
        ("after", "validation", "sex"),
    ]
    assert [g["group"] for g in tables[1]["groups"]] == ["a", "b"]
    assert tables[1]["groups"][0]["count"] == 20
    assert tables[1]["dp_diff"] == kept["after"]["validation"]["sex"]["dp_diff"]

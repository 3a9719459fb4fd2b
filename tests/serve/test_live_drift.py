"""Live drift: a real server's logged requests against its model version's training data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from PIL import Image

from forgeml.core.config import get_settings
from forgeml.monitor.drift import FORMAT, PNG_KEY, ReferenceProfile, read_window
from forgeml.serve import ServeOptions
from tests._wait import wait_until
from tests.cli.conftest import assert_cli_error, json_out
from tests.serve.conftest import LiveServer, adult_records, open_home
from tests.train.conftest import SST2_DIR, copy_home, trained_text_template

pytestmark = pytest.mark.slow
# the CLI's default window: at 600 rows, this held-out window flagged education-num by
# chance (p < 0.05 and an effect over 0.1 happen in small windows; benchmarks/drift_windows.py)
ROWS = 2000


@pytest.fixture(scope="module")
def logged(served_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    log = served_home / "logs" / "test-drift" / "requests.jsonl"  # logs stay in the home
    workspace = open_home(served_home)
    options = ServeOptions(log_sample_rate=1.0, log_path=log, log_redact=["fnlwgt"])
    live = LiveServer(workspace, ["adult-mlp@v1"], options).start()
    yield live, log
    live.stop()
    workspace.close()


def _send(url: str, records: list[dict[str, Any]], log: Path) -> None:
    with httpx.Client(timeout=30) as client:
        for start in range(0, len(records), 50):
            body = {"instances": records[start : start + 50]}
            response = client.post(f"{url}/v1/models/adult-mlp:predict", json=body)
            assert response.status_code == 200, response.text
    last = records[-1]
    wait_until(
        lambda: (
            log.is_file()
            and read_window(log, "adult-mlp", 1).row(0, named=True)["age"] == last["age"]
        ),
        30,
        "the request log holding the last request",
    )


def _test_split(home: Path) -> list[dict[str, Any]]:
    """The first ROWS rows of the test split of the data adult-mlp@v1 was trained on."""
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    workspace = open_home(home)
    try:
        version = get_model_version(workspace, "adult-mlp@v1").dataset_version
        assert version is not None
        frame = catalog.read_frame(workspace, version, "test").drop("Y", "__split__")
    finally:
        workspace.close()
    assert frame.height >= ROWS
    return frame.head(ROWS).to_dicts()


def _drift(cli: Any, served_home: Path, log: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("FORGEML_HOME", str(served_home))
    get_settings.cache_clear()
    args = ["monitor", "drift", "--model", "adult-mlp@v1", "--log", log, "--window", str(ROWS)]
    return json_out(cli(*args, "--json"))


def test_held_out_requests_do_not_drift_and_shifted_ones_do(
    cli: Any, served_home: Path, logged: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, log = logged
    held_out = _test_split(served_home)  # rows the model never saw, cleaned as its data was
    _send(live.url, held_out, log)

    calm = _drift(cli, served_home, log, monkeypatch)
    assert calm["reference"] == "adult-mlp@v1" and calm["rows"] == ROWS
    assert calm["drifted_columns"] == [] and calm["drifted"] is False
    columns = {column["column"] for column in calm["columns"]}
    assert {"age", "hours-per-week", "occupation"} <= columns
    assert "fnlwgt" not in columns  # redacted in the log: its values are gone
    assert "Y" not in columns  # the target is not a feature
    kept = served_home / "monitor" / "references" / "adult-mlp" / "v1.json"
    assert kept.is_file()  # built once, kept beside the model version
    [whole] = calm["multivariate"]
    assert whole["detector"] == "domain_classifier" and whole["drifted"] is False
    assert whole["current_rows"] == 1000 and "age" in whole["columns"]
    # the model's answers to held-out rows against its answers on the validation split
    assert [o["column"] for o in calm["predictions"]] == ["label", "confidence"]
    assert calm["predictions_drifted"] is False

    older = [{**r, "age": r["age"] + 25, "hours-per-week": 70} for r in held_out]
    _send(live.url, older, log)  # the latest window: the same people, older, working longer

    shifted = _drift(cli, served_home, log, monkeypatch)
    assert set(shifted["drifted_columns"]) == {"age", "hours-per-week"}
    assert shifted["multivariate"][0]["drifted"] is True
    # 2 of the columns: under the dataset-level share (half), which is its own verdict
    assert shifted["drifted_share"] == pytest.approx(2 / len(columns))


def test_a_reference_kept_in_an_older_format_is_rebuilt_not_misread(
    cli: Any, served_home: Path, logged: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, log = logged
    _send(live.url, adult_records(300), log)
    kept = served_home / "monitor" / "references" / "adult-mlp" / "v1.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    # format 1 kept a value sample per numeric column; its numbers are not to be trusted
    old = {"format": 1, "rows": 1, "options": {"sample_size": 100}, "columns": {}}
    kept.write_bytes(orjson.dumps(old))

    found = _drift(cli, served_home, log, monkeypatch)

    assert found["columns"]  # judged against a reference rebuilt from the training data
    assert ReferenceProfile.from_json(kept.read_bytes()).format == FORMAT == 2


def test_a_deployment_is_checked_on_its_primary_s_requests_and_drawn_over_time(
    cli: Any, served_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.serve import deployments

    workspace = open_home(served_home)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    try:
        deployments.deploy(workspace, "adult-prod", "adult-mlp@v1", ready_timeout=120)
        # a replica logging as the deployment's replicas serve: under the deployment's
        # name, to that name's request log
        options = ServeOptions(name="adult-prod", log_sample_rate=1.0)
        live = LiveServer(workspace, ["adult-mlp@v1"], options).start()
        path = served_home / "logs" / "requests" / "adult-prod.jsonl"
        try:
            records = adult_records(700)
            with httpx.Client(timeout=30) as client:
                for start in range(0, len(records), 100):
                    body = {"instances": records[start : start + 100]}
                    response = client.post(f"{live.url}/v1/models/adult-prod:predict", json=body)
                    assert response.status_code == 200, response.text
            wait_until(
                lambda: path.is_file() and read_window(path, "adult-prod", 1_000).height == 700,
                30,
                "the deployment's request log holding every request",
            )
        finally:
            live.stop()
        monkeypatch.setenv("FORGEML_HOME", str(served_home))
        get_settings.cache_clear()
        png = tmp_path / "drift.png"

        found = json_out(
            cli("monitor", "drift", "adult-prod", "--window", "300", "--png", png, "--json")
        )
    finally:
        deployments.delete(workspace, "adult-prod", grace_seconds=5)
        workspace.close()

    assert found["deployment"] == "adult-prod" and found["reference"] == "adult-mlp@v1"
    assert found["rows"] == 300 and str(path) in found["logs"]
    logged = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    times = [entry["ts"] for entry in logged for _ in entry["instances"]]
    windows = found["windows"]
    assert [(w["index"], w["rows"]) for w in windows] == [(0, 300), (300, 300), (600, 100)]
    assert [(w["start"], w["end"]) for w in windows] == [
        (times[0], times[299]), (times[300], times[599]), (times[600], times[699])
    ]  # fmt: skip
    assert {"age", "hours-per-week"} <= set(windows[0]["scores"])
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert orjson.loads(image.text[PNG_KEY]) == windows  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def text_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The trained text workspace: sst2-minilm@v1 records its SST-2 dataset version."""
    home = copy_home(trained_text_template(tmp_path_factory), tmp_path_factory.mktemp("t") / "h")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        yield home


def _sst2_rows(start: int, count: int) -> list[str]:
    """SST-2 training phrases past the 400 the text model was trained on."""
    lines = (SST2_DIR / "train.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines[start : start + count]]


def test_a_text_model_s_requests_are_compared_in_its_own_embedding_space(
    cli: Any, text_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = text_home / "logs" / "test-drift" / f"{tmp_path.name}.jsonl"
    workspace = open_home(text_home)
    live = LiveServer(
        workspace, ["sst2-minilm@v1"], ServeOptions(log_sample_rate=1.0, log_path=log)
    ).start()
    monkeypatch.setenv("FORGEML_HOME", str(text_home))
    get_settings.cache_clear()
    args = ["monitor", "drift", "sst2-minilm@v1", "--log", log, "--window", "150", "--json"]
    try:
        _send_texts(live.url, _sst2_rows(1_000, 150), log)
        calm = json_out(cli(*args))
        # the same server asked about something else entirely: Python's documentation
        _send_texts(live.url, [f"{name}: {doc}" for name, doc in _python_docs(150)], log)
        moved = json_out(cli(*args))
    finally:
        live.stop()
        workspace.close()

    calm_mmd = next(m for m in calm["multivariate"] if m["detector"] == "mmd:text")
    moved_mmd = next(m for m in moved["multivariate"] if m["detector"] == "mmd:text")
    assert calm_mmd["current_rows"] == 150 and calm_mmd["reference_rows"] == 320
    assert calm_mmd["drifted"] is False, calm_mmd
    assert moved_mmd["drifted"] is True and moved_mmd["p_value"] < 0.01, moved_mmd
    assert [o["column"] for o in calm["predictions"]] == ["label", "confidence"]


def _send_texts(url: str, texts: list[str], log: Path) -> None:
    with httpx.Client(timeout=60) as client:
        for start in range(0, len(texts), 50):
            body = {"instances": texts[start : start + 50]}
            response = client.post(f"{url}/v1/models/sst2-minilm:predict", json=body)
            assert response.status_code == 200, response.text
    wait_until(
        lambda: log.is_file() and read_window(log, "sst2-minilm", 1)["text"][0] == texts[-1],
        30,
        "the request log holding the last text",
    )


def _python_docs(count: int) -> list[tuple[str, str]]:
    import builtins

    found = []
    for name in sorted(dir(builtins)):
        doc = (getattr(builtins, name).__doc__ or "").strip().splitlines()
        if doc and doc[0] and not name.startswith("_"):
            found.append((name, doc[0]))
    return (found * (count // len(found) + 1))[:count]


def test_live_drift_refuses_what_it_cannot_compare(
    cli: Any, served_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORGEML_HOME", str(served_home))
    get_settings.cache_clear()
    missing = tmp_path / "none.jsonl"
    assert_cli_error(
        cli("monitor", "drift", "--model", "adult-mlp@v1", "--log", missing),
        f"No request log at {missing}",
    )
    other = tmp_path / "other.jsonl"
    other.write_text('{"model": "someone-else", "instances": [{"age": 1}]}\n{"model": "adult-ml')
    assert_cli_error(
        cli("monitor", "drift", "--model", "adult-mlp@v1", "--log", other),
        "holds no rows for model 'adult-mlp' yet",
    )
    assert_cli_error(
        cli("monitor", "drift", "--model", "adult-mlp@v1", "--reference", "adult"),
        "leave out --reference",
        code=2,
    )
    assert_cli_error(cli("monitor", "drift"), "Give --reference and --current", code=2)
    assert_cli_error(cli("monitor", "drift", "--model", "nosuch@v1"), "not registered")
    assert_cli_error(
        cli("monitor", "drift", "nosuch"), "No deployment or registered model is called 'nosuch'"
    )
    assert_cli_error(
        cli("monitor", "drift", "adult-mlp@v1", "--model", "adult-mlp@v1"), "once", code=2
    )
    png = tmp_path / "out.png"
    assert_cli_error(
        cli("monitor", "drift", "--reference", "a", "--current", "b", "--png", png),
        "--png draws a live request log",
        code=2,
    )
    assert_cli_error(cli("monitor", "drift", "adult-mlp@v1", "--log", other, "--png", png),
                     "holds no rows")  # fmt: skip
    assert not png.exists()  # nothing half-written

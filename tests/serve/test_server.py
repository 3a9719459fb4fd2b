from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
import schemathesis
import tritonclient.http as triton
from hypothesis import HealthCheck, Phase, given, settings
from prometheus_client.parser import text_string_to_metric_families

from forgeml.serve import ModelRepository, ServeOptions, build_app, create_app
from forgeml.serve.metrics import ServerMetrics
from tests._wait import wait_until
from tests.serve.conftest import LiveServer, adult_records, open_home
from tests.train.conftest import copy_home, trained_text_template

pytestmark = pytest.mark.slow
REFS = ["adult-mlp@v1", "sst2-minilm@v1"]
REFS_NAMES = [ref.split("@")[0] for ref in REFS]
TEXTS = ["a gorgeous, witty, seductive movie.", "the plot is nothing but boilerplate clichés"]


@pytest.fixture(scope="module")
def server(served_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    log = served_home / "logs" / "test-server" / "requests.jsonl"  # logs stay in the home
    options = ServeOptions(
        max_batch_size=64,
        max_wait_ms=100,
        max_body_bytes=64 * 1024,
        log_sample_rate=1.0,
        log_redact=["sex"],
        log_path=log,
    )
    workspace = open_home(served_home)
    live = LiveServer(workspace, REFS, options).start()
    yield live
    live.stop()
    workspace.close()


@pytest.fixture(scope="module")
def reference(served_home: Path) -> Any:
    """In-process torch outputs of the same raw rows, through the bundle's FeatureSpec."""
    import torch

    from forgeml.data.features import FeatureSpec
    from forgeml.tracking import download_bundle, get_model_version
    from forgeml.train.data import feature_tensor
    from forgeml.train.models.text_classifier import tokenize
    from forgeml.train.recipe import load_bundle_model

    workspace = open_home(served_home)
    bundles = {
        ref: download_bundle(workspace, get_model_version(workspace, ref), served_home / ref)
        for ref in REFS
    }
    workspace.close()
    spec = FeatureSpec.from_dict(
        orjson.loads((bundles[REFS[0]] / "feature_spec.json").read_bytes())
    )
    adult, text = (load_bundle_model(bundles[ref]) for ref in REFS)
    import polars as pl

    def adult_probabilities(records: list[dict[str, Any]]) -> np.ndarray:
        with torch.inference_mode():
            logits = adult(features=feature_tensor(spec, pl.DataFrame(records)))
        return torch.softmax(logits, dim=1).numpy()

    def text_probabilities(texts: list[str]) -> np.ndarray:
        params = orjson.loads((bundles[REFS[1]] / "model.json").read_bytes())["model"]["params"]
        with torch.inference_mode():
            logits = text(**tokenize(texts, params))
        return torch.softmax(logits, dim=1).numpy()

    return adult_probabilities, text_probabilities


def adult_inputs(records: list[dict[str, Any]], binary: bool = False) -> list[triton.InferInput]:
    inputs = []
    for name, value in records[0].items():
        column = [record[name] for record in records]
        if isinstance(value, str):
            array = np.array([v.encode() for v in column], dtype=np.object_)
            tensor = triton.InferInput(name, [len(column)], "BYTES")
        else:
            array = np.array(column, dtype=np.int64)
            tensor = triton.InferInput(name, [len(column)], "INT64")
        tensor.set_data_from_numpy(array, binary_data=binary)
        inputs.append(tensor)
    return inputs


def v2_body(records: list[dict[str, Any]]) -> dict[str, Any]:
    inputs = []
    for name, value in records[0].items():
        datatype = "BYTES" if isinstance(value, str) else "INT64"
        data = [record[name] for record in records]
        inputs.append({"name": name, "shape": [len(data)], "datatype": datatype, "data": data})
    return {"inputs": inputs}


def test_tritonclient_sees_a_live_ready_server_and_model_metadata(server: LiveServer) -> None:
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("adult-mlp") and client.is_model_ready("sst2-minilm")
    metadata = client.get_model_metadata("adult-mlp")
    assert metadata["versions"] == ["1"]
    inputs = {item["name"]: item["datatype"] for item in metadata["inputs"]}
    assert inputs["age"] == "INT64" and inputs["workclass"] == "BYTES" and len(inputs) == 14
    outputs = {item["name"]: item["shape"] for item in metadata["outputs"]}
    assert outputs == {"probabilities": [-1, 2], "label": [-1]}
    assert client.get_server_metadata()["name"] == "forgeml"


def test_tritonclient_sees_the_text_model_metadata_with_its_embeddings(
    server: LiveServer,
) -> None:
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    metadata = client.get_model_metadata("sst2-minilm")
    assert [(item["name"], item["datatype"]) for item in metadata["inputs"]] == [("text", "BYTES")]
    outputs = {item["name"]: item["shape"] for item in metadata["outputs"]}
    assert outputs == {"probabilities": [-1, 2], "label": [-1], "embeddings": [-1, -1]}


def test_tritonclient_infer_equals_torch_on_the_same_raw_rows(
    server: LiveServer, reference: Any
) -> None:
    records = adult_records(8)
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    outputs = [
        triton.InferRequestedOutput(n, binary_data=False) for n in ("probabilities", "label")
    ]
    result = client.infer("adult-mlp", adult_inputs(records), outputs=outputs)
    probabilities = result.as_numpy("probabilities")
    expected = reference[0](records)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5, atol=1e-6)
    labels = [
        label.decode() if isinstance(label, bytes) else label for label in result.as_numpy("label")
    ]
    assert labels == [["<=50K", ">50K"][i] for i in expected.argmax(axis=1)]
    assert result.get_response()["model_version"] == "1"


def test_tritonclient_text_model_equals_torch(server: LiveServer, reference: Any) -> None:
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    text = triton.InferInput("text", [len(TEXTS)], "BYTES")
    text.set_data_from_numpy(
        np.array([t.encode() for t in TEXTS], dtype=np.object_), binary_data=False
    )
    output = triton.InferRequestedOutput("probabilities", binary_data=False)
    result = client.infer("sst2-minilm", [text], outputs=[output])
    np.testing.assert_allclose(result.as_numpy("probabilities"), reference[1](TEXTS), atol=1e-5)


def test_tritonclient_defaults_binary_tensors_both_ways(server: LiveServer, reference: Any) -> None:
    records = adult_records(8, offset=20)
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    counted = _histogram(server, "forgeml_request_latency_seconds_count", "adult-mlp")
    # tritonclient's defaults: binary input data, and with no outputs named, binary outputs
    result = client.infer("adult-mlp", adult_inputs(records, binary=True))
    after = _histogram(server, "forgeml_request_latency_seconds_count", "adult-mlp")
    assert sum(after.values()) == sum(counted.values()) + 1  # labelled with its model
    assert result.get_output("probabilities")["parameters"]["binary_data_size"] == 8 * 2 * 4
    np.testing.assert_allclose(
        result.as_numpy("probabilities"), reference[0](records), rtol=1e-5, atol=1e-6
    )
    assert len(result.as_numpy("label")) == 8
    text = triton.InferInput("text", [len(TEXTS)], "BYTES")
    text.set_data_from_numpy(np.array([t.encode() for t in TEXTS], dtype=np.object_))
    wanted = [
        triton.InferRequestedOutput("probabilities", binary_data=False),
        triton.InferRequestedOutput("embeddings"),  # binary
    ]
    result = client.infer("sst2-minilm", [text], outputs=wanted)
    assert "data" in result.get_output("probabilities")
    np.testing.assert_allclose(result.as_numpy("probabilities"), reference[1](TEXTS), atol=1e-5)
    assert result.as_numpy("embeddings").shape[0] == len(TEXTS)


def _matches_metadata(answer: list[dict[str, Any]], listed: list[dict[str, Any]]) -> bool:
    """The answer's output tensors are the listed ones: names, datatypes, shapes (-1: any)."""
    if [o["name"] for o in answer] != [o["name"] for o in listed]:
        return False
    for got, meta in zip(answer, listed, strict=True):
        shape_fits = len(got["shape"]) == len(meta["shape"]) and all(
            want in (-1, size) for size, want in zip(got["shape"], meta["shape"], strict=True)
        )
        if got["datatype"] != meta["datatype"] or not shape_fits:
            return False
    return True


def _v2_inputs(model: str, rows: int) -> dict[str, Any]:
    if model == "adult-mlp":
        return v2_body(adult_records(rows, offset=60))
    text = {"name": "text", "shape": [rows], "datatype": "BYTES", "data": TEXTS[:rows]}
    return {"inputs": [text]}


@pytest.mark.parametrize("model", REFS_NAMES)
def test_v2_with_no_outputs_named_answers_every_output_the_metadata_lists(
    server: LiveServer, model: str
) -> None:
    listed = httpx.get(f"{server.url}/v2/models/{model}").json()["outputs"]
    url = f"{server.url}/v2/models/{model}/infer"
    answer = httpx.post(url, json=_v2_inputs(model, 2)).json()["outputs"]
    assert _matches_metadata(answer, listed), (answer, listed)
    for output in answer:  # each equal to what it is when asked for alone
        body = {**_v2_inputs(model, 2), "outputs": [{"name": output["name"]}]}
        alone = httpx.post(url, json=body).json()["outputs"][0]
        if output["datatype"] == "BYTES":
            assert output["data"] == alone["data"]
        else:
            np.testing.assert_allclose(output["data"], alone["data"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", REFS_NAMES)
def test_tritonclient_with_no_outputs_named_gets_every_output_the_metadata_lists_binary(
    server: LiveServer, model: str
) -> None:
    client = triton.InferenceServerClient(f"127.0.0.1:{server.port}")
    listed = client.get_model_metadata(model)["outputs"]
    if model == "adult-mlp":
        inputs = adult_inputs(adult_records(2, offset=60), binary=True)
    else:
        inputs = [triton.InferInput("text", [len(TEXTS)], "BYTES")]
        inputs[0].set_data_from_numpy(np.array([t.encode() for t in TEXTS], dtype=np.object_))
    result = client.infer(model, inputs)  # no outputs: every one, as binary data
    answer = result.get_response()["outputs"]
    assert _matches_metadata(answer, listed), (answer, listed)
    for output in answer:
        assert "data" not in output and result.as_numpy(output["name"]).shape[0] == 2


def test_malformed_binary_tensor_data_is_refused_and_the_server_keeps_serving(
    server: LiveServer,
) -> None:
    url = f"{server.url}/v2/models/sst2-minilm/infer"
    header = orjson.dumps(
        {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES",
                     "parameters": {"binary_data_size": 100}}]}
    )  # fmt: skip
    data = b"\x05\x00\x00\x00hello"
    cases = [
        ({"Inference-Header-Content-Length": str(len(header))}, header + data, "100 bytes"),
        ({"Inference-Header-Content-Length": "9999"}, header + data, "has only"),
        ({"Inference-Header-Content-Length": "x"}, header + data, "byte length"),
    ]
    for headers, body, message in cases:
        response = httpx.post(url, content=body, headers=headers)
        assert response.status_code == 422 and message in response.json()["error"]
    fixed = header.replace(b"100", b"9")
    response = httpx.post(
        url, content=fixed + data, headers={"Inference-Header-Content-Length": str(len(fixed))}
    )
    assert response.status_code == 200 and response.json()["outputs"][0]["shape"][0] == 1


def test_predict_takes_raw_records_and_texts(server: LiveServer, reference: Any) -> None:
    records = adult_records(3, offset=10)
    response = httpx.post(f"{server.url}/v1/models/adult-mlp:predict", json={"instances": records})
    assert response.status_code == 200
    body = response.json()
    expected = reference[0](records)
    got = [[p["probabilities"]["<=50K"], p["probabilities"][">50K"]] for p in body["predictions"]]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert body["model_version"] == "1"
    text = httpx.post(f"{server.url}/v1/models/sst2-minilm:predict", json={"instances": TEXTS})
    assert text.status_code == 200
    assert [p["label"] for p in text.json()["predictions"]] == [
        str(i) for i in reference[1](TEXTS).argmax(axis=1)
    ]


def _same_predictions(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [p["label"] for p in got] == [p["label"] for p in expected]
    np.testing.assert_allclose(
        [list(p["probabilities"].values()) for p in got],
        [list(p["probabilities"].values()) for p in expected],
        atol=1e-5,
    )


def _by_row(outputs: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Columnar `:predict` outputs as the row format's predictions."""
    count = len(outputs["label"])
    return [{name: values[i] for name, values in outputs.items()} for i in range(count)]


def test_predict_takes_text_instances_as_objects_of_named_inputs(server: LiveServer) -> None:
    url = f"{server.url}/v1/models/sst2-minilm:predict"
    bare = httpx.post(url, json={"instances": TEXTS}).json()
    named = httpx.post(url, json={"instances": [{"text": text} for text in TEXTS]})
    assert named.status_code == 200, named.text
    _same_predictions(named.json()["predictions"], bare["predictions"])


def test_predict_takes_columnar_inputs_and_answers_by_column(server: LiveServer) -> None:
    records = adult_records(3, offset=10)
    url = f"{server.url}/v1/models/adult-mlp:predict"
    by_row = httpx.post(url, json={"instances": records}).json()
    columns = {name: [record[name] for record in records] for name in records[0]}
    answer = httpx.post(url, json={"inputs": columns})
    assert answer.status_code == 200, answer.text
    outputs = answer.json()["outputs"]
    _same_predictions(_by_row(outputs), by_row["predictions"])
    text_url = f"{server.url}/v1/models/sst2-minilm:predict"
    by_row = httpx.post(text_url, json={"instances": TEXTS}).json()
    for inputs in ({"text": TEXTS}, TEXTS):  # named, or the bare list of a one-input model
        outputs = httpx.post(text_url, json={"inputs": inputs}).json()["outputs"]
        _same_predictions(_by_row(outputs), by_row["predictions"])


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain"])
def test_an_inference_body_sent_as_curl_sends_it_is_read_as_json(
    server: LiveServer, content_type: str
) -> None:
    url = f"{server.url}/v1/models/sst2-minilm:predict"
    declared = httpx.post(url, json={"instances": TEXTS}).json()
    content = orjson.dumps({"instances": TEXTS})
    answer = httpx.post(url, content=content, headers={"content-type": content_type})
    assert answer.status_code == 200, answer.text
    _same_predictions(answer.json()["predictions"], declared["predictions"])
    not_json = httpx.post(url, content=b"instances=1", headers={"content-type": content_type})
    assert not_json.status_code == 400
    assert not_json.json() == {"error": "The request body is not valid JSON."}


async def _concurrent(url: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*(client.post(url, json=body) for body in bodies))


def _histogram(server: LiveServer, name: str, model: str) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics").text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(name) and sample.labels.get("model") == model:
                found[sample.name + sample.labels.get("le", "")] = sample.value
    return found


def test_concurrent_requests_run_in_batches_with_the_unbatched_results(
    server: LiveServer, reference: Any
) -> None:
    records = adult_records(32, offset=100)
    before = _histogram(server, "forgeml_batch_size", "adult-mlp")
    url = f"{server.url}/v2/models/adult-mlp/infer"
    responses = asyncio.run(_concurrent(url, [v2_body([record]) for record in records]))
    assert [r.status_code for r in responses] == [200] * 32
    got = np.array([r.json()["outputs"][0]["data"] for r in responses])
    np.testing.assert_allclose(got, reference[0](records), rtol=1e-5, atol=1e-6)
    after = _histogram(server, "forgeml_batch_size", "adult-mlp")
    batches = after["forgeml_batch_size_count"] - before.get("forgeml_batch_size_count", 0)
    rows = after["forgeml_batch_size_sum"] - before.get("forgeml_batch_size_sum", 0)
    assert rows == 32 and batches < 32  # some batches held more than one request


def test_metrics_parse_and_count_requests_per_model(server: LiveServer) -> None:
    def count(model: str) -> float:
        text = httpx.get(f"{server.url}/metrics").text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "forgeml_requests_total" and sample.labels["model"] == model
        )

    before = count("sst2-minilm")
    for _ in range(3):
        httpx.post(f"{server.url}/v1/models/sst2-minilm:predict", json={"instances": TEXTS})
    assert count("sst2-minilm") == before + 3
    families = {
        f.name for f in text_string_to_metric_families(httpx.get(f"{server.url}/metrics").text)
    }
    assert {
        "forgeml_request_latency_seconds",
        "forgeml_queue_depth",
        "forgeml_request_errors",
        "forgeml_gc_pause_seconds",
        "forgeml_gc_frozen_objects",
    } <= families


def test_metrics_time_every_garbage_collection_of_the_server(server: LiveServer) -> None:
    def full_collections() -> float:
        text = httpx.get(f"{server.url}/metrics").text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "forgeml_gc_pause_seconds_count"
            and sample.labels["generation"] == "2"
        )

    before = full_collections()
    gc.collect()
    gc.collect()
    assert full_collections() >= before + 2
    # an app in a process it does not own (this test's) leaves the collector alone
    assert not server.app.state.repository.options.freeze_heap


def test_collections_are_timed_once_and_only_while_watched() -> None:
    metrics = ServerMetrics()

    def full_collections() -> float | None:
        labels = {"generation": "2"}
        return metrics.registry.get_sample_value("forgeml_gc_pause_seconds_count", labels)

    metrics.watch_gc()
    metrics.watch_gc()  # twice: still one timer
    try:
        gc.collect()
    finally:
        metrics.unwatch_gc()
    assert full_collections() == 1
    gc.collect()
    assert full_collections() == 1


def _is_logged(entry: dict[str, Any], records: list[dict[str, Any]]) -> bool:
    if (entry["model"], entry["protocol"]) != ("adult-mlp", "predict"):
        return False
    return [row["fnlwgt"] for row in entry["instances"]] == [r["fnlwgt"] for r in records]


def test_request_log_holds_sampled_requests_with_redacted_fields(server: LiveServer) -> None:
    records = adult_records(2, offset=50)
    httpx.post(f"{server.url}/v1/models/adult-mlp:predict", json={"instances": records})
    log_path = server.app.state.request_log.path

    def logged() -> list[dict[str, Any]]:
        # whole lines only: the writer may be halfway through one
        lines = log_path.read_bytes().split(b"\n")[:-1] if log_path.exists() else []
        return [e for e in map(orjson.loads, lines) if _is_logged(e, records)]

    wait_until(logged, what="the request's log entry")
    entry = logged()[0]
    assert entry["version"] == "adult-mlp@v1"
    assert all(row["sex"] == "[REDACTED]" for row in entry["instances"])
    assert entry["instances"][0]["occupation"] is not None


GOOD = adult_records(1)[0]
TENSORS = v2_body([GOOD])["inputs"]
V2, PREDICT = "/v2/models/adult-mlp/infer", "/v1/models/adult-mlp:predict"
TEXT_PREDICT = "/v1/models/sst2-minilm:predict"
COLUMNS = {name: [value] for name, value in GOOD.items()}
BAD_CASES = [
    ("malformed JSON", V2, b'{"inputs": [', 400),
    ("malformed JSON", PREDICT, b"{instances", 400),
    ("wrong dtype", PREDICT, {"instances": [{**GOOD, "age": "old"}]}, 422),
    ("missing feature", PREDICT, {"instances": [{k: GOOD[k] for k in list(GOOD)[1:]}]}, 422),
    ("extra feature", PREDICT, {"instances": [{**GOOD, "height": 180}]}, 422),
    ("unknown model", "/v1/models/nosuch:predict", {"instances": [GOOD]}, 404),
    ("unknown model", "/v2/models/nosuch/infer", {"inputs": TENSORS}, 404),
    ("wrong shape", V2, {"inputs": [{**t, "shape": [2]} for t in TENSORS]}, 422),
    ("wrong v2 dtype", V2, {"inputs": [{**TENSORS[0], "datatype": "BYTES"}, *TENSORS[1:]]}, 422),
    ("missing tensor", V2, {"inputs": TENSORS[1:]}, 422),
    ("not a request", V2, {"outputs": []}, 422),
    ("too large", PREDICT, {"instances": [GOOD] * 1000}, 413),
    ("both formats", PREDICT, {"instances": [GOOD], "inputs": COLUMNS}, 422),
    ("neither format", PREDICT, {"signature_name": "serving_default"}, 422),
    ("ragged columns", PREDICT, {"inputs": {**COLUMNS, "age": [30, 40]}}, 422),
    ("scalar column", PREDICT, {"inputs": {**COLUMNS, "age": 30}}, 422),
    ("unknown column", PREDICT, {"inputs": {**COLUMNS, "height": [180]}}, 422),
    ("missing column", PREDICT, {"inputs": {k: v for k, v in COLUMNS.items() if k != "age"}}, 422),
    ("unnamed columns", PREDICT, {"inputs": [GOOD]}, 422),
    ("text object of another field", TEXT_PREDICT, {"instances": [{"review": "fine"}]}, 422),
    ("text column of numbers", TEXT_PREDICT, {"inputs": {"text": [3]}}, 422),
]


@pytest.mark.parametrize(
    ("case", "path", "body", "status"), BAD_CASES, ids=[c[0] for c in BAD_CASES]
)
def test_bad_input_gets_its_status_and_a_json_error_and_the_server_keeps_serving(
    server: LiveServer, case: str, path: str, body: Any, status: int
) -> None:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"content-type": "application/json"}
    response = httpx.post(f"{server.url}{path}", content=content, headers=headers)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, str) and error.endswith(".") and "Traceback" not in error
    again = httpx.post(f"{server.url}/v1/models/adult-mlp:predict", json={"instances": [GOOD]})
    assert again.status_code == 200


def test_a_server_still_loading_answers_503(served_home: Path) -> None:
    workspace = open_home(served_home)
    app = create_app(workspace, ["adult-mlp@v1"], ServeOptions())  # lifespan not run: not loaded

    async def ask() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return (
                await client.get("/v2/health/ready"),
                await client.get("/v2/health/live"),
                await client.post("/v1/models/adult-mlp:predict", json={"instances": [GOOD]}),
            )

    ready, live, predict = asyncio.run(ask())
    workspace.close()
    assert (ready.status_code, live.status_code, predict.status_code) == (503, 200, 503)
    assert "not ready" in predict.json()["error"]


def test_a_language_model_answers_rows_with_a_422_naming_the_openai_routes(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    template = trained_text_template(tmp_path_factory)
    workspace = open_home(copy_home(template, tmp_path_factory.mktemp("lm") / "home"))
    repository = ModelRepository(workspace, ["pydoc-gpt@v1"], ServeOptions())
    repository.load()
    tensor = {"name": "text", "shape": [1], "datatype": "BYTES", "data": ["the film"]}

    async def ask() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=build_app(repository))
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return (
                await client.post("/v1/models/pydoc-gpt:predict", json={"instances": ["the"]}),
                await client.post("/v2/models/pydoc-gpt/infer", json={"inputs": [tensor]}),
            )

    try:
        answers = asyncio.run(ask())
    finally:
        repository.close()
        workspace.close()
    for response in answers:
        assert response.status_code == 422, response.text
        assert "/v1/completions" in response.json()["error"]


def test_no_generated_request_gets_a_server_error(server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    tried: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        tried.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(
            max_examples=5,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def no_server_error(case: Any) -> None:
            response = case.call(base_url=server.url, timeout=30)
            assert response.status_code < 500, (case.method, case.path, response.text)

        no_server_error()
    assert "POST /v2/models/{name}/infer" in tried and "POST /v1/models/{name}:predict" in tried

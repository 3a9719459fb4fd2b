"""Pickle replays (BentoML CVE-2024-2912, CVE-2025-27520; MLflow CVE-2024-37052..37060;
ClearML CVE-2024-24590): a pickle whose `__reduce__` creates a sentinel file, plain and
compressed, sent to every place forgeml reads a user's bytes. The sentinel never appears
and the answer is a 4xx or one sentence."""

from __future__ import annotations

import ast
import gzip
import io
import pickle
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from forgeml.core.config import Settings
from forgeml.core.errors import InvalidDataError
from forgeml.core.workspace import Workspace
from forgeml.serve.options import ServeOptions
from forgeml.tracking._bundle import check_bundle, extract_tar
from tests.conftest import CliResult
from tests.gateway.conftest import TEST_OPTIONS, GatewayUnderTest, start_gateway
from tests.serve.conftest import LiveServer, open_home

SRC = Path(__file__).resolve().parents[2] / "src" / "forgeml"


class _Sentinel:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))  # loading it creates the file


def payloads(sentinel: Path) -> dict[str, bytes]:
    raw = pickle.dumps(_Sentinel(sentinel), protocol=4)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("model.pkl", raw)
    return {"plain": raw, "gzip": gzip.compress(raw), "zip": zipped.getvalue()}


def test_the_sentinel_pickle_does_create_its_file_when_loaded(tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    pickle.loads(payloads(sentinel)["plain"]).close()  # the control: the payload is live

    assert sentinel.exists()


@pytest.mark.parametrize("kind", ["plain", "gzip", "zip"])
@pytest.mark.parametrize("file_name", ["rows.pkl", "rows.csv", "rows.parquet", "rows.jsonl"])
def test_cve_2024_24590_dataset_add_never_unpickles(
    cli: Callable[..., CliResult], tmp_path: Path, kind: str, file_name: str
) -> None:
    sentinel = tmp_path / "sentinel"
    suffix = {"plain": "", "gzip": ".gz", "zip": ".zip"}[kind]
    upload = tmp_path / f"{file_name}{suffix}"
    upload.write_bytes(payloads(sentinel)[kind])

    result = cli("data", "add", "evil", upload)

    assert result.code in (1, 2), result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert not sentinel.exists()


@pytest.mark.parametrize("planted", ["model.pkl", "weights.pt", "extra/opt.pth", "model.bin"])
def test_cve_2024_37052_a_model_bundle_with_a_pickle_is_refused_on_import(
    tmp_path: Path, planted: str
) -> None:
    bundle = tmp_path / "bundle"
    (bundle / Path(planted).parent).mkdir(parents=True, exist_ok=True)
    (bundle / "model.json").write_text("{}")
    (bundle / "model.safetensors").write_bytes(b"0")
    (bundle / planted).write_bytes(payloads(tmp_path / "sentinel")["plain"])

    with pytest.raises(InvalidDataError, match="a pickle-based format that can run code"):
        check_bundle(bundle)


@pytest.mark.parametrize("planted", ["model.pkl", "optimizer.pt", "sub/state.ckpt"])
def test_cve_2024_37057_a_pickle_planted_in_a_stored_bundle_never_reaches_a_loader(
    tmp_path: Path, planted: str
) -> None:
    blob = tmp_path / "bundle.tar"
    with tarfile.open(blob, "w") as tar:
        for name, data in [("model.json", b"{}"), (planted, payloads(tmp_path / "s")["plain"])]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

    with pytest.raises(InvalidDataError, match="a pickle-based file"):
        extract_tar(blob, tmp_path / "out")

    assert not (tmp_path / "out").exists()


def _calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield ast.unparse(node.func), node


def _keyword(call: ast.Call, name: str) -> object:
    for keyword in call.keywords:
        if keyword.arg == name and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    return None


def test_cve_2025_27520_no_code_path_unpickles() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for func, call in _calls(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(SRC)}:{call.lineno} {func}"
            if func.endswith("torch.load") and _keyword(call, "weights_only") is not True:
                found.append(where + " without weights_only=True")
            if func.split(".")[-1] in {"load", "loads"} and func.split(".")[0] in {
                "pickle", "cloudpickle", "dill", "joblib", "_pickle",
            }:  # fmt: skip
                found.append(where)
            if func.endswith(("read_pickle", "Unpickler")):
                found.append(where)
            if func.endswith(("np.load", "numpy.load")) and _keyword(call, "allow_pickle"):
                found.append(where + " with allow_pickle")
            if _keyword(call, "trust_remote_code") is True:
                found.append(where + " with trust_remote_code=True")

    assert found == []


@pytest.fixture(scope="module")
def model_server(served_home: Path) -> Iterator[LiveServer]:
    workspace = open_home(served_home)
    live = LiveServer(workspace, ["adult-mlp@v1"], ServeOptions(max_body_bytes=64 * 1024)).start()
    yield live
    live.stop()
    workspace.close()


def _post_routes(server: LiveServer) -> list[str]:
    schema = httpx.get(f"{server.url}/openapi.json", timeout=30).json()
    posts = [path for path, operations in schema["paths"].items() if "post" in operations]
    return sorted({p.replace("{name}", "adult-mlp").replace("{version}", "1") for p in posts})


@pytest.mark.parametrize("kind", ["plain", "gzip", "zip"])
@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/octet-stream"},
        {"Content-Type": "application/python-pickle"},
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
        {},
    ],
)
def test_cve_2024_2912_model_server_bodies_are_never_unpickled(
    model_server: LiveServer, tmp_path: Path, kind: str, headers: dict[str, str]
) -> None:
    sentinel = tmp_path / "sentinel"
    body = payloads(sentinel)[kind]
    routes = _post_routes(model_server)
    assert any(":predict" in path or path.endswith("/infer") for path in routes), routes

    with httpx.Client(base_url=model_server.url, timeout=30) as client:
        answers = {path: client.post(path, content=body, headers=headers) for path in routes}

    assert {
        path: a.status_code for path, a in answers.items() if not 400 <= a.status_code < 500
    } == {}
    assert all(isinstance(a.json(), dict) for a in answers.values())
    assert not sentinel.exists()


@pytest.fixture(scope="module")
def gateway(
    model_server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayUnderTest]:
    home = tmp_path_factory.mktemp("gw") / "home"
    workspace = Workspace(Settings(home=home, user="tester"))
    for gateway in start_gateway(workspace, TEST_OPTIONS):
        gateway.deploy("adult", [model_server.url])
        yield gateway
    workspace.close()


@pytest.mark.parametrize("kind", ["plain", "gzip", "zip"])
@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/adult/infer",
        "/v1/models/adult:predict",
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/embeddings",
    ],
)
def test_cve_2025_27520_the_gateway_passes_no_pickle_to_a_loader(
    gateway: GatewayUnderTest, tmp_path: Path, kind: str, path: str
) -> None:
    sentinel = tmp_path / "sentinel"
    key = gateway.key()

    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/octet-stream"}
    answer = gateway.client.post(path, content=payloads(sentinel)[kind], headers=headers)

    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert answer.json()["error"]
    assert not sentinel.exists()

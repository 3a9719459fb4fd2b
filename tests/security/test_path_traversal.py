"""Path traversal replays: every name, ref and artifact key goes through the one
normaliser (`core.ids.validate_name` / `parse_ref`, and the artifact store's digest
check) before it becomes a path, and an uploaded archive cannot plant a link or write
outside its folder."""

from __future__ import annotations

import base64
import io
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from forgeml.api import api_in_thread
from forgeml.core.artifacts import ArtifactStore
from forgeml.core.config import Settings
from forgeml.core.errors import ForgemlError, InvalidNameError
from forgeml.core.ids import parse_ref, validate_name
from forgeml.core.store import JobRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking._bundle import extract_tar
from tests.cli.conftest import assert_cli_error
from tests.conftest import CliResult

# what every CVE below also tries: the plain forms, then each decoder's way round them
COMMON = [
    "../../../etc/passwd",
    "..",
    "/etc/passwd",
    "..\\..\\windows\\win.ini",
    "C:\\Windows\\win.ini",
    "C:",
    "name\x00.txt",
    "name\n",
]
CVE_PAYLOADS = {
    # MLflow: a model version's source / artifact location walking out of the store
    "cve_2023_1177": ["file:///etc/passwd", "models/../../../etc", "./../secret"],
    # MLflow: the 1177 fix bypassed through a URL's fragment and query
    "cve_2023_6977": ["x#/../../../etc/passwd", "x?/../../etc", "#.."],
    # MLflow: artifact paths percent-encoded past the check
    "cve_2024_1483": ["%2e%2e/%2e%2e/etc/passwd", "..%2F..%2Fetc", "%2e%2e"],
    # MLflow: double-encoding, decoded once by the check and again by the reader
    "cve_2024_1560": ["%252e%252e%252fetc", "..%252f..%252fetc", "%25%32%65"],
    # MLflow: path parameters (`;`) that a URL parser drops and a file path keeps
    "cve_2024_1593": ["name;/../../etc", "..;/etc/passwd", "x;..", "a;b"],
    # MLflow: the fragment again, on artifact download (CVE-2023-6909's fix bypassed)
    "cve_2024_3848": ["model#/../../../../../etc/shadow", "a#b", "%23..%2f"],
    # Ray: static and log-file routes taking a relative path
    "cve_2023_6020": ["static/../../../etc/passwd", "....//....//etc", ".hidden"],
    "cve_2023_6021": ["logs/../../../../root/.ssh/id_rsa", "~/.ssh/id_rsa", "-rf"],
}
KINDS = ["dataset", "model", "prompt", "index", "deployment", "artifact"]


def _refused_everywhere(payload: str, store: ArtifactStore) -> None:
    for kind in KINDS:
        with pytest.raises(InvalidNameError) as raised:
            validate_name(payload, kind)
        sentence = str(raised.value)
        assert sentence.startswith(f"Invalid {kind} ") and sentence.count(". ") == 0
        assert "\n" not in sentence and "\x00" not in sentence
    with pytest.raises(InvalidNameError):
        parse_ref(f"{payload}@v1", "model reference")
    with pytest.raises(InvalidNameError, match="Invalid artifact digest"):
        store.get_bytes(payload)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ArtifactStore:
    return ArtifactStore(str(tmp_path_factory.mktemp("artifacts")))


def _cases(cve: str) -> list[str]:
    return CVE_PAYLOADS[cve] + COMMON


@pytest.mark.parametrize("payload", _cases("cve_2023_1177"))
def test_cve_2023_1177_source_paths_out_of_the_store(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2023_6977"))
def test_cve_2023_6977_fragment_and_query_bypass(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2024_1483"))
def test_cve_2024_1483_percent_encoded_dots(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2024_1560"))
def test_cve_2024_1560_double_encoding(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2024_1593"))
def test_cve_2024_1593_path_parameters(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2024_3848"))
def test_cve_2024_3848_fragment_on_download(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2023_6020"))
def test_cve_2023_6020_static_path(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


@pytest.mark.parametrize("payload", _cases("cve_2023_6021"))
def test_cve_2023_6021_log_file_path(payload: str, store: ArtifactStore) -> None:
    _refused_everywhere(payload, store)


def test_cve_2023_1177_a_plain_name_and_digest_still_pass(store: ArtifactStore) -> None:
    digest = store.put_bytes(b"weights")

    assert validate_name("adult-mlp.v2_final") == "adult-mlp.v2_final"
    assert str(parse_ref("adult-mlp@v3")) == "adult-mlp@v3"
    assert store.get_bytes(digest) == b"weights"


@pytest.mark.parametrize(
    "payload", ["..%2Fsecret", "%2e%2e%2fsecret", "x;..%2fsecret", "..%252Fsecret"]
)
def test_cve_2023_6021_the_api_never_reads_a_file_a_run_id_points_at(
    tmp_path: Path, payload: str
) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    planted = tmp_path / "home" / "agents" / "secret.json"
    planted.parent.mkdir(parents=True)
    planted.write_text('{"secret": "planted"}')
    try:
        with api_in_thread(workspace) as url, httpx.Client(base_url=url, timeout=10) as client:
            answer = client.get(f"/api/v1/agents/runs/{payload}")
    finally:
        workspace.close()

    # %2F decodes to '/', so those miss the route (404); the rest reach validate_name (400)
    assert answer.status_code in (400, 404)
    assert "planted" not in answer.text


@pytest.mark.parametrize("name", ["../../outside", "..%2F..%2Foutside", "C:\\x", "a;b"])
def test_cve_2024_1593_the_cli_refuses_a_dataset_name_that_is_a_path(
    cli: Callable[..., CliResult], tmp_path: Path, name: str
) -> None:
    csv = tmp_path / "rows.csv"
    csv.write_text("a,b\n1,2\n")

    assert_cli_error(cli("data", "add", name, csv), f"Invalid dataset name {name!r}")
    assert not (tmp_path / "outside").exists()


def _tar(members: Iterator[tuple[tarfile.TarInfo, bytes]], path: Path) -> Path:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str, kind: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


def _fifo(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.FIFOTYPE
    return info, b""


# what an archive may not hold, and the words of its refusal
UNSAFE_MEMBERS = [
    (_link("model.safetensors", "/etc/passwd", tarfile.SYMTYPE), "holds the link"),
    (_link("weights", "model.json", tarfile.SYMTYPE), "holds the link"),  # even inside
    (_link("model.safetensors", "/etc/passwd", tarfile.LNKTYPE), "holds the link"),
    (_link("h", "model.json", tarfile.LNKTYPE), "holds the link"),
    (_file("../../escaped.txt"), "would land outside the folder"),
    (_file("sub/../../escaped.txt"), "would land outside the folder"),
]


@pytest.mark.parametrize(("member", "why"), UNSAFE_MEMBERS)
def test_cve_2025_8917_an_archive_with_a_link_or_an_escaping_member_is_refused(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes], why: str
) -> None:
    blob = _tar(iter([_file("model.json", b"{}"), member]), tmp_path / "bundle.tar")
    dest = tmp_path / "out" / "bundle"
    dest.mkdir(parents=True)
    (dest / "old.txt").write_text("before")

    with pytest.raises(ForgemlError) as raised:
        extract_tar(blob, dest)

    assert why in str(raised.value)
    assert [p.name for p in dest.iterdir()] == ["old.txt"]  # left as it was
    assert (
        not (tmp_path / "escaped.txt").exists() and not (tmp_path / "out" / "escaped.txt").exists()
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["bundle"]  # no staging left


def test_cve_2025_8917_a_plain_archive_is_unpacked(tmp_path: Path) -> None:
    blob = _tar(
        iter([_file("model.json", b"{}"), _file("w/a.safetensors", b"w")]), tmp_path / "b.tar"
    )

    dest = extract_tar(blob, tmp_path / "out")

    assert (dest / "w" / "a.safetensors").read_bytes() == b"w"


@pytest.mark.parametrize(
    ("member", "why"),
    [
        *UNSAFE_MEMBERS,
        (_file("/tmp/escaped.txt"), "would land outside the folder"),
        (_fifo("pipe"), "which is not a plain file"),
    ],
)
def test_cve_2025_8917_a_command_folder_with_a_link_or_an_escaping_member_is_a_400(
    tmp_path: Path, member: tuple[tarfile.TarInfo, bytes], why: str
) -> None:
    from tests.api.conftest import api_client

    blob = _tar(iter([_file("a.md", b"# a"), member]), tmp_path / "docs.tar").read_bytes()
    body = {
        "argv": ["rag", "index", "docs", "docs"],
        "files": {"q.yaml": base64.b64encode(b"x: 1").decode()},
        "folders": {"docs": base64.b64encode(blob).decode()},
    }
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        with api_client(workspace) as client:
            answer = client.post("/api/v1/commands", json=body)
        with workspace.store.session() as session:
            jobs = session.scalars(select(JobRecord)).all()
    finally:
        workspace.close()

    assert answer.status_code == 400, answer.text
    assert answer.json()["error"].startswith("folders.docs is refused: ")
    assert why in answer.json()["error"]
    # nothing written: no command folder, no job, nothing beside the workspace
    assert jobs == []
    assert list((tmp_path / "home" / "commands").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.tar", "home"]
    assert not Path("/tmp/escaped.txt").exists()

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forgeml.core.errors import (
    ForgemlError,
    IntegrityError,
    InvalidDataError,
    InvalidNameError,
    NotFoundError,
    UsageError,
)
from forgeml.core.ids import new_id
from forgeml.core.store import DatasetVersion, ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking import (
    PromotionRejectedError,
    RunHandle,
    attach_run,
    download_bundle,
    finish_run,
    get_model_version,
    list_models,
    log_model_bundle,
    model_aliases,
    promote,
    register_model,
    start_run,
)
from tests.data.conftest import assert_one_sentence
from tests.tracking.conftest import audit_actions, make_bundle


@pytest.fixture(scope="module")
def trained(
    tracking_workspace: Workspace,
    dataset_version: DatasetVersion,
    tmp_path_factory: pytest.TempPathFactory,
) -> RunHandle:
    handle = start_run(tracking_workspace, {"seed": 1}, "toy-train", dataset_version)
    finish_run(handle, "FINISHED", {"accuracy": 0.8, "loss": 0.4})
    return attach_run(tracking_workspace, handle.run_id)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bundle(tmp_path_factory.mktemp("bundle") / "model")


def _register(
    workspace: Workspace, run: RunHandle, bundle: Path, name: str, **metrics: float
) -> ModelVersionRecord:
    return register_model(workspace, run, name, bundle, metrics=metrics or None)


def _mlflow_versions(run: RunHandle, name: str) -> list[int]:
    found = run.client.search_model_versions(f"name = '{name}'")
    return sorted(int(version.version) for version in found)


def test_register_model_records_lineage_in_forgeml_and_mlflow(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path, dataset_version: DatasetVersion
) -> None:
    record = register_model(tracking_workspace, trained, "lineage", bundle)
    assert (record.ref, record.run_id) == ("lineage@v1", trained.run_id)
    assert record.dataset_version_id == dataset_version.id
    assert record.metrics == {"accuracy": 0.8, "loss": 0.4}
    assert record.parent is None
    assert record.created_by == "tester"
    assert tracking_workspace.artifacts.exists(record.artifact_digest)

    version = trained.client.get_model_version("lineage", "1")
    assert version.run_id == trained.run_id
    assert version.source == f"{trained.artifact_uri}/model"
    assert version.tags["forgeml.artifact_digest"] == record.artifact_digest
    files = {item.path for item in trained.client.list_artifacts(trained.run_id, "model")}
    assert files == {"model/model.json", "model/model.safetensors", "model/feature_spec.json"}
    tags = trained.client.get_run(trained.run_id).data.tags
    assert tags["forgeml.model_digest"] == record.artifact_digest

    again = register_model(tracking_workspace, trained, "lineage", bundle)
    assert again.version == 2
    assert again.artifact_digest == record.artifact_digest
    assert audit_actions(tracking_workspace, "lineage@v1") == ["model.register"]
    fetched = get_model_version(tracking_workspace, "lineage@v1")
    assert fetched.run.dataset_version_id == dataset_version.id
    assert fetched.dataset_version is not None
    assert fetched.dataset_version.ref == dataset_version.ref


def test_the_bundle_digest_depends_on_content_only(
    trained: RunHandle, tmp_path: Path, bundle: Path
) -> None:
    first = log_model_bundle(trained, bundle)
    copy = make_bundle(tmp_path / "copy")
    os.utime(copy / "model.json", (1_000_000, 1_000_000))
    assert log_model_bundle(trained, copy) == first
    other = make_bundle(tmp_path / "other", seed=1)
    assert log_model_bundle(trained, other) != first


def test_download_bundle_round_trips_and_verifies_the_digest(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path, tmp_path: Path
) -> None:
    record = register_model(tracking_workspace, trained, "download", bundle)
    folder = download_bundle(tracking_workspace, record, tmp_path / "out")
    for name in ("model.json", "model.safetensors", "feature_spec.json"):
        assert (folder / name).read_bytes() == (bundle / name).read_bytes()
    assert download_bundle(tracking_workspace, record, tmp_path / "out") == folder
    default = download_bundle(tracking_workspace, record)
    assert default == tracking_workspace.settings.home / "models" / "download-v1"

    blob = Path(tracking_workspace.artifacts.local_path(record.artifact_digest, verify=False))
    original = blob.read_bytes()
    try:
        blob.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with pytest.raises(IntegrityError) as caught:
            download_bundle(tracking_workspace, record, tmp_path / "corrupt")
        assert_one_sentence(str(caught.value))
        assert not (tmp_path / "corrupt").exists()
    finally:
        blob.write_bytes(original)


def test_the_parent_model_is_recorded(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path
) -> None:
    base = _register(tracking_workspace, trained, bundle, "base", accuracy=0.7)
    promote(tracking_workspace, "base", base.version, "production", "accuracy")
    adapted = register_model(tracking_workspace, trained, "adapted", bundle, parent="base")
    assert adapted.parent == "base@v1"
    by_alias = register_model(
        tracking_workspace, trained, "adapted", bundle, parent="base@production"
    )
    assert by_alias.parent == "base@v1"
    external = "hf:sentence-transformers/all-MiniLM-L6-v2"
    lora = register_model(tracking_workspace, trained, "lora", bundle, parent=external)
    assert lora.parent == external
    assert trained.client.get_model_version("lora", "1").tags["forgeml.parent"] == external


def test_an_unknown_parent_registers_nothing(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path
) -> None:
    with pytest.raises(NotFoundError) as caught:
        register_model(tracking_workspace, trained, "orphan", bundle, parent="no-such-model")
    assert_one_sentence(str(caught.value))
    assert list_models(tracking_workspace, "orphan") == []
    assert _mlflow_versions(trained, "orphan") == []


def test_registration_is_undone_in_mlflow_when_forgeml_refuses_it(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path
) -> None:
    # a forgeml row MLflow does not know about: its next version number clashes
    with tracking_workspace.store.session() as session:
        session.add(
            ModelVersionRecord(
                id=new_id(),
                name="clash",
                version=1,
                run_id=trained.run_id,
                artifact_digest="0" * 64,
                metrics={},
                created_by="tester",
            )
        )
    with pytest.raises(IntegrityError) as caught:
        register_model(tracking_workspace, trained, "clash", bundle)
    assert_one_sentence(str(caught.value))
    assert "out of step" in str(caught.value)
    assert _mlflow_versions(trained, "clash") == []
    assert [record.version for record in list_models(tracking_workspace, "clash")] == [1]


@pytest.mark.parametrize(
    ("change", "error", "fragment"),
    [
        ("missing", NotFoundError, "does not exist"),
        ("no-model-json", InvalidDataError, "lacks model.json"),
        ("no-weights", InvalidDataError, "no .safetensors weights"),
        ("pickle", InvalidDataError, "pickle-based format"),
        ("link", InvalidDataError, "contains the link"),
    ],
)
def test_bad_bundles_are_refused_before_anything_is_registered(
    tracking_workspace: Workspace,
    trained: RunHandle,
    tmp_path: Path,
    change: str,
    error: type[ForgemlError],
    fragment: str,
) -> None:
    folder = make_bundle(tmp_path / "bad")
    if change == "missing":
        folder = tmp_path / "nowhere"
    elif change == "no-model-json":
        (folder / "model.json").unlink()
    elif change == "no-weights":
        (folder / "model.safetensors").unlink()
    elif change == "pickle":
        (folder / "optimizer.pt").write_bytes(b"\x80\x04")
    else:
        (folder / "extra.json").symlink_to(folder / "model.json")
    with pytest.raises(error) as caught:
        register_model(tracking_workspace, trained, f"bad-{change}", folder)
    assert_one_sentence(str(caught.value))
    assert fragment in str(caught.value)
    assert list_models(tracking_workspace, f"bad-{change}") == []
    assert _mlflow_versions(trained, f"bad-{change}") == []


def test_model_references_resolve(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path, tmp_path: Path
) -> None:
    first = _register(tracking_workspace, trained, bundle, "refs", accuracy=0.5)
    second = register_model(
        tracking_workspace, trained, "refs", make_bundle(tmp_path / "b2", seed=2)
    )
    promote(tracking_workspace, "refs", first.version, "champion", "accuracy")
    assert get_model_version(tracking_workspace, "refs").ref == "refs@v2"
    assert get_model_version(tracking_workspace, "refs@v1").ref == "refs@v1"
    assert get_model_version(tracking_workspace, "refs@champion").ref == "refs@v1"
    prefix = second.artifact_digest[:10]
    assert get_model_version(tracking_workspace, f"refs@{prefix}").ref == "refs@v2"
    assert model_aliases(tracking_workspace, "refs") == {"champion": 1}
    assert [record.ref for record in list_models(tracking_workspace, "refs")] == [
        "refs@v1",
        "refs@v2",
    ]


@pytest.mark.parametrize(
    ("ref", "error", "message"),
    [
        ("ghost", NotFoundError, "Model 'ghost' is not registered (see `forgeml models list`)."),
        ("errs@v9", NotFoundError, "Model 'errs' has no version v9 (its versions are v1..v1)."),
        ("errs@production", NotFoundError, "Model 'errs' has no alias 'production'"),
        ("errs@", UsageError, "Invalid model reference 'errs@'"),
        ("errs@not an alias", UsageError, "after '@' give vN, an alias or a digest prefix"),
        ("../errs", InvalidNameError, "Invalid model name"),
    ],
)
def test_unknown_or_malformed_model_references_fail_clearly(
    tracking_workspace: Workspace,
    trained: RunHandle,
    bundle: Path,
    ref: str,
    error: type[ForgemlError],
    message: str,
) -> None:
    if not list_models(tracking_workspace, "errs"):
        register_model(tracking_workspace, trained, "errs", bundle)
    with pytest.raises(error) as caught:
        get_model_version(tracking_workspace, ref)
    assert_one_sentence(str(caught.value))
    assert message in str(caught.value)


def test_promotion_is_gated_on_the_metric(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path
) -> None:
    v1 = _register(tracking_workspace, trained, bundle, "gated", accuracy=0.8)
    v2 = _register(tracking_workspace, trained, bundle, "gated", accuracy=0.7)
    v3 = _register(tracking_workspace, trained, bundle, "gated", accuracy=0.9)

    first = promote(tracking_workspace, "gated", v1.version, "production", "accuracy")
    assert (first.previous, first.value, first.forced, first.changed) == (None, 0.8, False, True)

    with pytest.raises(PromotionRejectedError) as caught:
        promote(tracking_workspace, "gated", v2.version, "production", "accuracy")
    message = str(caught.value)
    assert_one_sentence(message)
    assert "gated@v2" in message and "gated@v1" in message
    assert "0.7" in message and "0.8" in message
    assert model_aliases(tracking_workspace, "gated") == {"production": 1}

    better = promote(tracking_workspace, "gated", v3.version, "production", "accuracy")
    assert (better.previous, better.previous_value, better.forced) == ("gated@v1", 0.8, False)
    assert get_model_version(tracking_workspace, "gated@production").ref == "gated@v3"

    same = promote(tracking_workspace, "gated", v3.version, "production", "accuracy")
    assert not same.changed

    forced = promote(tracking_workspace, "gated", v2.version, "production", "accuracy", force=True)
    assert (forced.forced, forced.previous) == (True, "gated@v3")
    assert get_model_version(tracking_workspace, "gated@production").ref == "gated@v2"
    assert audit_actions(tracking_workspace, "gated@v2") == [
        "model.register",
        "model.promote.forced",
    ]
    assert audit_actions(tracking_workspace, "gated@v3") == ["model.register", "model.promote"]


def test_promotion_with_lower_is_better(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path
) -> None:
    v1 = _register(tracking_workspace, trained, bundle, "lowest", rmse=2.0)
    v2 = _register(tracking_workspace, trained, bundle, "lowest", rmse=3.0)
    v3 = _register(tracking_workspace, trained, bundle, "lowest", rmse=1.0)
    promote(tracking_workspace, "lowest", v1.version, "production", "rmse", mode="min")
    with pytest.raises(PromotionRejectedError) as caught:
        promote(tracking_workspace, "lowest", v2.version, "production", "rmse", mode="min")
    assert "lower is better" in str(caught.value)
    promote(tracking_workspace, "lowest", v3.version, "production", "rmse", mode="min")
    assert model_aliases(tracking_workspace, "lowest") == {"production": 3}


def test_promotion_without_the_metric_is_rejected(
    tracking_workspace: Workspace, trained: RunHandle, bundle: Path
) -> None:
    v1 = _register(tracking_workspace, trained, bundle, "nometric", accuracy=0.8)
    v2 = _register(tracking_workspace, trained, bundle, "nometric", f1=0.9)
    with pytest.raises(PromotionRejectedError) as missing:
        promote(tracking_workspace, "nometric", v1.version, "production", "f1")
    assert_one_sentence(str(missing.value))
    assert "has no metric 'f1' to compare (its metrics: accuracy)" in str(missing.value)
    promote(tracking_workspace, "nometric", v1.version, "production", "accuracy")
    with pytest.raises(PromotionRejectedError) as holder:
        promote(tracking_workspace, "nometric", v2.version, "production", "f1")
    assert_one_sentence(str(holder.value))
    assert "which nometric@v1 lacks" in str(holder.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"alias": "v2"}, UsageError, "Invalid alias 'v2'"),
        ({"alias": "latest"}, UsageError, "Invalid alias 'latest'"),
        ({"alias": "my alias"}, UsageError, "Invalid alias 'my alias'"),
        ({"mode": "best"}, UsageError, "Unknown promotion mode 'best'"),
        ({"version": 42}, NotFoundError, "has no version v42"),
        ({"name": "nobody"}, NotFoundError, "Model 'nobody' is not registered"),
    ],
)
def test_bad_promotions_fail_clearly(
    tracking_workspace: Workspace,
    trained: RunHandle,
    bundle: Path,
    kwargs: dict[str, object],
    error: type[ForgemlError],
    fragment: str,
) -> None:
    if not list_models(tracking_workspace, "promo-errors"):
        _register(tracking_workspace, trained, bundle, "promo-errors", accuracy=0.5)
    arguments: dict[str, object] = {
        "name": "promo-errors",
        "version": 1,
        "alias": "production",
        "metric": "accuracy",
        **kwargs,
    }
    with pytest.raises(error) as caught:
        promote(tracking_workspace, **arguments)  # type: ignore[arg-type]
    assert_one_sentence(str(caught.value))
    assert fragment in str(caught.value)

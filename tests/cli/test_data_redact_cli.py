from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.data.conftest import edit_recipe

Cli = Callable[..., CliResult]

SMS = [
    "Urgent! call 09061701461 to claim your prize",
    "ok see you at 7, my new number is 07912345678",
    "roaming: +44 7912 345678 or +86 138 9141 7776",
    "2 stars, 1999 was better; scores 10 20 30",
]


@pytest.fixture
def sms(cli: Cli, tmp_path: Path) -> Cli:
    path = tmp_path / "sms.csv"
    pl.DataFrame({"label": ["spam", "ham", "ham", "ham"], "text": SMS}).write_csv(path)
    assert_ok(cli("data", "add", "sms", path))
    return cli


def test_region_masks_national_numbers_and_is_recorded_for_rebuild(
    sms: Cli, home_workspace: Workspace, tmp_path: Path
) -> None:
    without = json_out(sms("data", "redact", "sms", "--json"))
    with_gb = json_out(sms("data", "redact", "sms@v1", "--region", "gb", "--json"))

    assert without["report"]["counts"]["text"] == {"phone": 2}
    assert with_gb["report"]["counts"]["text"] == {"phone": 4}
    assert_ok(sms("data", "export", with_gb["ref"], tmp_path / "out.csv"))
    assert pl.read_csv(tmp_path / "out.csv")["text"].to_list() == [
        "Urgent! call [PHONE] to claim your prize",
        "ok see you at 7, my new number is [PHONE]",
        "roaming: [PHONE] or [PHONE]",
        SMS[3],
    ]
    with home_workspace.store.session() as session:
        recipe = catalog.resolve(session, with_gb["ref"]).recipe
    assert recipe["params"]["region"] == "GB"

    assert_ok(sms("data", "rebuild", with_gb["ref"]))
    edit_recipe(home_workspace, with_gb["ref"], region=None)
    assert_cli_error(sms("data", "rebuild", with_gb["ref"]), "does not reproduce it")


@pytest.mark.parametrize(
    ("region", "words"),
    [("XX", "--region: unknown region 'XX'"), ("UK", "the United Kingdom is GB")],
)
def test_unknown_region_flag_is_a_usage_error(sms: Cli, region: str, words: str) -> None:
    assert_cli_error(sms("data", "redact", "sms", "--region", region), words, 2)


def test_unknown_region_in_a_recipe_is_a_config_error(sms: Cli, tmp_path: Path) -> None:
    recipe = tmp_path / "redact.yaml"
    recipe.write_text("region: Atlantis\n")
    assert_cli_error(sms("data", "redact", "sms", "--recipe", recipe), "unknown region 'Atlantis'")

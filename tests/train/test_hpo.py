from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from sqlalchemy import create_engine, inspect

from forgeml.core.errors import ConfigError
from forgeml.core.store import open_store
from forgeml.train.config import apply_overrides
from forgeml.train.hpo import SearchSpace, optuna_storage, to_overrides, tune

QUADRATIC_SPACE = {
    "params": {
        "model.params.x": {"type": "float", "low": -10, "high": 10},
        "model.params.y": {"type": "int", "low": -10, "high": 10},
        "optimizer.lr": {"type": "loguniform", "low": 1e-5, "high": 1e-1},
        "optimizer.name": {"type": "categorical", "choices": ["adamw", "sgd"]},
    }
}


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'home' / 'forgeml.db'}"


# an in-memory store (and so in-memory studies) for tests that do not need persistence
MEMORY = "sqlite://"


def _quadratic(params: dict[str, Any], trial: optuna.Trial) -> float:
    penalty = 0.0 if params["optimizer.name"] == "adamw" else 1.0
    lr_error = (params["optimizer.lr"] - 1e-3) ** 2
    x, y = params["model.params.x"], params["model.params.y"]
    return (x - 3.0) ** 2 + (y + 2) ** 2 + penalty + lr_error


def test_tpe_finds_the_optimum_region_quickly(db_url: str) -> None:
    space = SearchSpace.parse(
        {
            "params": {
                "model.params.x": {"type": "float", "low": -10, "high": 10},
                "model.params.y": {"type": "int", "low": -10, "high": 10},
            }
        }
    )

    def bowl(params: dict[str, Any], _trial: optuna.Trial) -> float:
        return (params["model.params.x"] - 3.0) ** 2 + (params["model.params.y"] + 2) ** 2

    result = tune(bowl, space, n_trials=30, storage_url=db_url, study_name="bowl", seed=0)
    assert len(result.trials) == 30
    assert result.best_value is not None
    assert result.best_value < 2.0
    assert abs(result.best_params["model.params.x"] - 3.0) < 1.5
    assert abs(result.best_params["model.params.y"] + 2) <= 1
    assert result.best_trial is not None
    assert result.trials[result.best_trial].value == result.best_value


def test_every_parameter_type_is_sampled_within_its_space() -> None:
    space = SearchSpace.parse(QUADRATIC_SPACE)
    result = tune(_quadratic, space, n_trials=12, storage_url=MEMORY, study_name="t", seed=1)
    for trial in result.trials:
        assert -10 <= trial.params["model.params.x"] <= 10
        assert isinstance(trial.params["model.params.y"], int)
        assert 1e-5 <= trial.params["optimizer.lr"] <= 1e-1
        assert trial.params["optimizer.name"] in {"adamw", "sgd"}
    lrs = sorted(trial.params["optimizer.lr"] for trial in result.trials)
    # log-uniform: values spread over decades, not bunched near the top
    assert lrs[0] < 1e-3


def test_tpe_beats_its_own_random_start() -> None:
    space = SearchSpace.parse(QUADRATIC_SPACE)
    result = tune(_quadratic, space, n_trials=30, storage_url=MEMORY, study_name="q", seed=3)
    values = [trial.value for trial in result.trials if trial.value is not None]
    # TPE starts with 10 random trials; the guided ones must do better on average
    assert sum(values[20:]) / 10 < sum(values[:10]) / 10


def test_same_seed_same_search() -> None:
    space = SearchSpace.parse(QUADRATIC_SPACE)
    first = tune(_quadratic, space, n_trials=12, storage_url=MEMORY, study_name="a", seed=7)
    second = tune(_quadratic, space, n_trials=12, storage_url=MEMORY, study_name="b", seed=7)
    assert [t.params for t in first.trials] == [t.params for t in second.trials]


def _curve_objective(_params: dict[str, Any], trial: optuna.Trial) -> float:
    # after five good trials to compare against, every other trial follows a known-bad curve
    bad = trial.number >= 5 and trial.number % 2 == 1
    value = 0.0
    for step in range(5):
        value = (10.0 if bad else 1.0) / (step + 1)
        trial.report(value, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return value


@pytest.mark.parametrize("pruner", ["median", "asha"])
def test_pruner_stops_trials_with_a_bad_curve(pruner: Any) -> None:
    space = SearchSpace.parse(
        {"params": {"model.params.x": {"type": "float", "low": 0, "high": 1}}}
    )
    result = tune(
        _curve_objective, space, n_trials=15, storage_url=MEMORY, study_name="c", pruner=pruner
    )
    pruned = [trial.number for trial in result.trials if trial.state == "PRUNED"]
    assert pruned
    assert set(pruned) <= {5, 7, 9, 11, 13}
    assert all(len(result.trials[number].intermediate) < 5 for number in pruned)
    assert result.best_value is not None
    assert result.best_value == pytest.approx(0.2)


def test_without_pruner_every_trial_completes() -> None:
    space = SearchSpace.parse(
        {"params": {"model.params.x": {"type": "float", "low": 0, "high": 1}}}
    )
    result = tune(
        _curve_objective, space, n_trials=8, storage_url=MEMORY, study_name="c", pruner="none"
    )
    assert {trial.state for trial in result.trials} == {"COMPLETE"}


def test_a_second_call_continues_the_stored_study(db_url: str) -> None:
    space = SearchSpace.parse(QUADRATIC_SPACE)
    first = tune(_quadratic, space, n_trials=5, storage_url=db_url, study_name="s")
    second = tune(_quadratic, space, n_trials=4, storage_url=db_url, study_name="s")
    assert [trial.number for trial in second.trials] == list(range(9))
    assert second.trials[:5] == first.trials
    # a continued study does not replay the random start of the first call
    assert second.trials[5].params != first.trials[0].params
    assert second.best_value is not None
    assert first.best_value is not None
    assert second.best_value <= first.best_value


def test_maximize() -> None:
    space = SearchSpace.parse(
        {"params": {"model.params.x": {"type": "float", "low": 0, "high": 1}}}
    )
    result = tune(
        lambda params, _trial: params["model.params.x"],
        space,
        n_trials=15,
        storage_url=MEMORY,
        study_name="m",
        direction="maximize",
    )
    assert result.best_value is not None
    assert result.best_value > 0.8


def test_continuing_with_the_other_direction_is_refused(db_url: str) -> None:
    space = SearchSpace.parse(
        {"params": {"model.params.x": {"type": "float", "low": 0, "high": 1}}}
    )
    tune(lambda p, _t: p["model.params.x"], space, n_trials=1, storage_url=db_url, study_name="d")
    with pytest.raises(ConfigError, match=r"Study 'd' exists and is to minimize; use that"):
        tune(
            lambda p, _t: p["model.params.x"],
            space,
            n_trials=1,
            storage_url=db_url,
            study_name="d",
            direction="maximize",
        )


def test_all_trials_pruned_or_failed_gives_no_best() -> None:
    space = SearchSpace.parse(
        {"params": {"model.params.x": {"type": "float", "low": 0, "high": 1}}}
    )

    def never(_params: dict[str, Any], _trial: optuna.Trial) -> float:
        raise optuna.TrialPruned()

    result = tune(never, space, n_trials=3, storage_url=MEMORY, study_name="p")
    assert result.best_value is None
    assert result.best_params == {}
    assert [trial.state for trial in result.trials] == ["PRUNED"] * 3


def test_objective_errors_propagate_and_are_recorded(db_url: str) -> None:
    space = SearchSpace.parse(
        {"params": {"model.params.x": {"type": "float", "low": 0, "high": 1}}}
    )

    def broken(_params: dict[str, Any], _trial: optuna.Trial) -> float:
        raise ConfigError("bad config in a trial.")

    with pytest.raises(ConfigError, match="bad config in a trial"):
        tune(broken, space, n_trials=3, storage_url=db_url, study_name="e")
    result = tune(
        lambda p, _t: p["model.params.x"], space, n_trials=1, storage_url=db_url, study_name="e"
    )
    assert [trial.state for trial in result.trials] == ["FAIL", "COMPLETE"]


def test_studies_live_beside_the_forgeml_store(backend_url: str) -> None:
    store = open_store(backend_url)
    space = SearchSpace.parse(QUADRATIC_SPACE)
    tune(_quadratic, space, n_trials=3, storage_url=backend_url, study_name="side")
    store.dispose()
    # both sides still open the database: forgeml's migrations and Optuna's schema check
    reopened = open_store(backend_url)
    forgeml_tables = set(inspect(reopened.engine).get_table_names())
    assert "audit_events" in forgeml_tables
    assert "trials" not in forgeml_tables
    reopened.dispose()
    storage = optuna_storage(backend_url)
    assert optuna.study.get_all_study_names(storage) == ["side"]
    storage.engine.dispose()


def test_sqlite_studies_go_to_a_sibling_file(tmp_path: Path, db_url: str) -> None:
    space = SearchSpace.parse(QUADRATIC_SPACE)
    (tmp_path / "home").mkdir()
    tune(_quadratic, space, n_trials=2, storage_url=db_url, study_name="f")
    engine = create_engine(f"sqlite:///{tmp_path / 'home' / 'forgeml-optuna.db'}")
    assert {"studies", "trials", "alembic_version"} <= set(inspect(engine).get_table_names())
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_to_overrides_round_trips_through_apply_overrides() -> None:
    params = {"optimizer.lr": 0.001, "optimizer.name": "sgd", "model.params.hidden": 64}
    data: dict[str, Any] = {"optimizer": {"lr": 1.0}}
    assert apply_overrides(data, to_overrides(params)) == {
        "optimizer": {"lr": 0.001, "name": "sgd"},
        "model": {"params": {"hidden": 64}},
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "float", "low": 2, "high": 1}, r"`low` \(2.0\) must not exceed `high` \(1.0\)"),
        ({"type": "gaussian", "low": 0, "high": 1}, r"key 'params.lr.type'"),
        ({"type": "float", "low": 0}, r"needs both `low` and `high`"),
        ({"type": "loguniform", "low": 0, "high": 1}, r"needs `low` > 0"),
        ({"type": "int", "low": 0.5, "high": 3}, r"whole-number `low` and `high`"),
        ({"type": "categorical", "choices": []}, r"non-empty `choices`"),
        ({"type": "categorical", "choices": [1], "low": 0}, r"not `low`/`high`"),
        ({"type": "float", "low": 0, "high": 1, "choices": [1]}, r"not `choices`"),
        ({"type": "float", "low": 0, "high": 1, "step": 2}, r"unknown key 'params.lr.step'"),
    ],
)
def test_bad_parameter_specs_are_config_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        SearchSpace.parse({"params": {"lr": spec}}, "tune.yaml")
    assert str(caught.value).startswith("tune.yaml: ")
    assert str(caught.value).endswith(".")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"params": {}}, "at least one parameter"),
        ({"params": {"optimizer..lr": {"type": "float", "low": 0, "high": 1}}}, "dotted config"),
        ({}, "missing required key 'params'"),
    ],
)
def test_bad_spaces_are_config_errors(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SearchSpace.parse(data)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_trials": 0}, r"--trials must be at least 1 \(got 0\)\."),
        ({"pruner": "hyperband"}, r"Unknown pruner 'hyperband': choose median, asha or none\."),
        ({"sampler": "grid"}, r"Unknown sampler 'grid': choose tpe or random\."),
        ({"storage_url": "mysql://u@h/db"}, r"'mysql' is neither; set FORGEML_DB_URL"),
    ],
)
def test_bad_tune_arguments_are_config_errors(
    db_url: str, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"n_trials": 1, "storage_url": db_url, "study_name": "x"}
    arguments.update(kwargs)
    with pytest.raises(ConfigError, match=message):
        tune(_quadratic, SearchSpace.parse(QUADRATIC_SPACE), **arguments)

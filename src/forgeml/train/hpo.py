"""Hyper-parameter search with Optuna: a typed search space, TPE, median/ASHA pruning.

`tune` runs `n_trials` of a user objective. The objective receives the sampled values
(dotted config keys such as `optimizer.lr`, ready for `to_overrides`) and the Optuna trial,
trains, reports intermediate metrics with `trial.report(value, step)` and stops early when
`trial.should_prune()` says so (raise `optuna.TrialPruned`).

Studies live beside the forgeml metadata store (`optuna_storage`), so a second `tune` with
the same study name continues where the first stopped.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forgeml.core.configfile import parse_model
from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    import optuna

ParamType = Literal["float", "int", "categorical", "loguniform"]
Direction = Literal["minimize", "maximize"]
SamplerName = Literal["tpe", "random"]
PrunerName = Literal["median", "asha", "none"]
Objective = Callable[[dict[str, Any], "optuna.Trial"], float]

# Optuna's schema in a PostgreSQL forgeml database (see `optuna_storage`).
OPTUNA_SCHEMA = "optuna"


class ParamSpec(BaseModel):
    """How one config key is searched."""

    model_config = ConfigDict(extra="forbid")

    type: ParamType = Field(description="float, int, categorical or loguniform (log-scale float).")
    low: float | None = Field(default=None, description="Lower bound (float, int, loguniform).")
    high: float | None = Field(default=None, description="Upper bound, inclusive.")
    choices: list[Any] | None = Field(default=None, description="Values of a categorical.")

    @model_validator(mode="after")
    def _consistent(self) -> ParamSpec:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical parameter needs a non-empty `choices` list")
            if self.low is not None or self.high is not None:
                raise ValueError("a categorical parameter takes `choices`, not `low`/`high`")
            return self
        if self.low is None or self.high is None:
            raise ValueError(f"a {self.type} parameter needs both `low` and `high`")
        if self.choices is not None:
            raise ValueError(f"a {self.type} parameter takes `low`/`high`, not `choices`")
        if self.low > self.high:
            raise ValueError(f"`low` ({self.low}) must not exceed `high` ({self.high})")
        if self.type == "loguniform" and self.low <= 0:
            raise ValueError("a loguniform parameter needs `low` > 0")
        if self.type == "int" and not (self.low.is_integer() and self.high.is_integer()):
            raise ValueError("an int parameter needs whole-number `low` and `high`")
        return self

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        """Sample this parameter for `trial` under `name`."""
        if self.type == "categorical":
            return trial.suggest_categorical(name, self.choices or [])
        low, high = float(self.low or 0.0), float(self.high or 0.0)
        if self.type == "int":
            return trial.suggest_int(name, int(low), int(high))
        return trial.suggest_float(name, low, high, log=self.type == "loguniform")


class SearchSpace(BaseModel):
    """The searched config keys, e.g. `{"optimizer.lr": {"type": "loguniform", ...}}`."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, ParamSpec] = Field(
        description="Dotted config key (as for --set) -> how it is searched."
    )

    @model_validator(mode="after")
    def _keys(self) -> SearchSpace:
        if not self.params:
            raise ValueError("give at least one parameter to search")
        for key in self.params:
            if not key or any(not part for part in key.split(".")):
                raise ValueError(f"'{key}' is not a dotted config key such as 'optimizer.lr'")
        return self

    @classmethod
    def parse(cls, data: Any, source: str = "search space") -> SearchSpace:
        """Validate a mapping (e.g. from YAML) as a search space.

        Raises:
            ConfigError: naming `source`, the key path and what was expected.
        """
        return parse_model(cls, data, source)

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """One value per parameter, sampled for `trial`."""
        return {name: spec.suggest(trial, name) for name, spec in self.params.items()}


def to_overrides(params: Mapping[str, Any]) -> list[str]:
    """Sampled values as `--set` overrides (`key=value`; JSON is valid YAML)."""
    return [f"{key}={json.dumps(value)}" for key, value in params.items()]


@dataclass
class TrialRecord:
    """One finished (or pruned, or failed) trial."""

    number: int
    state: str  # COMPLETE | PRUNED | FAIL | RUNNING | WAITING
    value: float | None
    params: dict[str, Any]
    intermediate: dict[int, float] = field(default_factory=dict)


@dataclass
class TuneResult:
    """The outcome of a study: its best trial and every trial so far."""

    study_name: str
    best_params: dict[str, Any]
    best_value: float | None  # None when no trial completed
    best_trial: int | None
    trials: list[TrialRecord]


def optuna_storage(db_url: str) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage beside the forgeml metadata store at `db_url`.

    Optuna's tables are not prefixed (`studies`, `trials`, `version_info`, ...) and it stamps
    its own Alembic revision into `alembic_version`, the very table forgeml's migrations
    use, so one schema cannot hold both (each side then refuses to open the database).
    PostgreSQL: the same database, schema `optuna`. SQLite (one schema per file): the
    sibling file `<name>-optuna.db` (in memory for an in-memory store).

    Raises:
        ConfigError: `db_url` is neither SQLite nor PostgreSQL.
    """
    import optuna
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database in ("", ":memory:"):
            return optuna.storages.RDBStorage("sqlite://")
        stem, dot, suffix = database.rpartition(".")
        database = f"{stem}-optuna.{suffix}" if dot else f"{database}-optuna"
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.RDBStorage(
            f"sqlite:///{database}", engine_kwargs={"creator": partial(_sqlite_connect, database)}
        )
    if url.get_backend_name() == "postgresql":
        _create_schema(db_url)
        return optuna.storages.RDBStorage(
            db_url, engine_kwargs={"connect_args": {"options": f"-csearch_path={OPTUNA_SCHEMA}"}}
        )
    raise ConfigError(
        f"Optuna studies are kept beside a SQLite or PostgreSQL store, and "
        f"'{url.get_backend_name()}' is neither; set FORGEML_DB_URL to one of them."
    )


def _sqlite_connect(path: str) -> sqlite3.Connection:
    # as forgeml's own store: WAL and a busy timeout, so parallel trials wait for the
    # write lock instead of failing, and commits skip the fsync a rollback journal needs
    connection = sqlite3.connect(path, timeout=30, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def _create_schema(db_url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
    finally:
        engine.dispose()


def _sampler(name: SamplerName, seed: int) -> optuna.samplers.BaseSampler:
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"Unknown sampler '{name}': choose tpe or random.")


def _pruner(name: PrunerName) -> optuna.pruners.BasePruner:
    import optuna

    if name == "median":
        # Stop a trial whose intermediate value is worse than the median of earlier trials
        # at the same step, once five trials have completed to compare against.
        return optuna.pruners.MedianPruner(n_startup_trials=5)
    if name == "asha":
        # Asynchronous Successive Halving (Li et al. 2020), Optuna's default rungs.
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ConfigError(f"Unknown pruner '{name}': choose median, asha or none.")


def tune(
    objective: Objective,
    space: SearchSpace,
    *,
    n_trials: int,
    storage_url: str,
    study_name: str,
    direction: Direction = "minimize",
    sampler: SamplerName = "tpe",
    pruner: PrunerName = "median",
    seed: int = 0,
) -> TuneResult:
    """Run `n_trials` more trials of `objective` over `space` in study `study_name`.

    A study that already exists in the storage is continued: its earlier trials inform the
    sampler and count in the result.

    Args:
        objective: `objective(params, trial) -> value`; `params` maps each dotted key of
            `space` to its sampled value. Exceptions other than `optuna.TrialPruned`
            propagate (the trial is recorded as FAIL first).
        space: The searched parameters.
        n_trials: Trials to run in this call.
        storage_url: The forgeml metadata store URL (see `optuna_storage`).
        study_name: Name of the study (created, or continued when it exists).
        direction: Whether `objective` is to be minimised or maximised.
        sampler: `tpe` (Bergstra et al. 2011) or `random`.
        pruner: `median`, `asha` or `none`.
        seed: Seed of the sampler, for reproducible searches.

    Returns:
        The best trial so far and every trial of the study.

    Raises:
        ConfigError: a bad trial count, sampler, pruner or storage, or an existing study
            with the other direction.
    """
    import optuna

    if n_trials < 1:
        raise ConfigError(f"--trials must be at least 1 (got {n_trials}).")
    pruner_obj = _pruner(pruner)
    storage = optuna_storage(storage_url)
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=study_name,
            direction=direction,
            pruner=pruner_obj,
            load_if_exists=True,
        )
        if study.direction.name.lower() != direction:
            raise ConfigError(
                f"Study '{study_name}' exists and is to {study.direction.name.lower()}; "
                f"use that direction or another study name."
            )
        # a continued study gets a fresh random stream rather than replaying the first one
        study.sampler = _sampler(sampler, seed + len(study.trials))
        study.optimize(lambda trial: objective(space.suggest(trial), trial), n_trials=n_trials)
        return _result(study)
    finally:
        storage.remove_session()
        storage.engine.dispose()


def _result(study: optuna.Study) -> TuneResult:
    from optuna.trial import TrialState

    trials = [
        TrialRecord(
            number=trial.number,
            state=trial.state.name,
            value=trial.value,
            params=dict(trial.params),
            intermediate=dict(trial.intermediate_values),
        )
        for trial in study.trials
    ]
    complete = [
        trial
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if trial.value is not None and not math.isnan(trial.value)
    ]
    if not complete:
        return TuneResult(study.study_name, {}, None, None, trials)
    best = study.best_trial
    return TuneResult(study.study_name, dict(best.params), best.value, best.number, trials)

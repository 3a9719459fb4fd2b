"""The EU AI Act's Annex IV headings a model card can fill from forgeml's records.

Annex IV of Regulation (EU) 2024/1689 lists the technical documentation of a high-risk AI
system. forgeml keeps records that answer parts of points 1 (general description),
2(a)-(d) (development process, design choices, data requirements) and 5 (risk
management, as far as stated limitations and measured fairness go); point 3 (monitoring,
functioning and control) is filled as far as the deployments serving the version record
it (status, latency objective, request logging for drift and feedback). A heading no record
answers says "not recorded": a card never guesses.
"""

from __future__ import annotations

from forgeml.governance._card_facts import CardFacts
from forgeml.governance.lineage_refs import HIDDEN_LABEL

NOT_RECORDED = "not recorded"


def annex_iv(facts: CardFacts) -> dict[str, str]:
    """Annex IV heading -> its text (keys: general, development, data, monitoring, risk)."""
    return {
        "general": _general(facts),
        "development": _development(facts),
        "data": _data(facts),
        "monitoring": _monitoring(facts),
        "risk": _risk(facts),
    }


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _general(facts: CardFacts) -> str:
    purpose = facts.notes.get("intended_use")
    return _bullets([
        f"Intended purpose: {'see Intended use' if purpose else NOT_RECORDED}.",
        f"Provider (registered by): {facts.created_by}.",
        f"Version: `{facts.ref}`, registered {facts.created_at}, bundle digest `{facts.digest}`.",
    ])  # fmt: skip


def _development(facts: CardFacts) -> str:
    config = facts.config
    if not config:
        return NOT_RECORDED
    model = config.get("model", {})
    optimizer = config.get("optimizer", {})
    length = (f"{config['max_steps']} steps" if config.get("max_steps")
              else f"{config.get('epochs')} epochs")  # fmt: skip
    items = [
        f"Architecture: `{model.get('name')}` with parameters `{model.get('params', {})}`.",
        f"Training: {length}, batch size {config.get('batch_size')}, optimizer "
        f"`{optimizer.get('name')}` (learning rate {optimizer.get('lr')}), precision "
        f"{config.get('precision')}, seed {config.get('seed')}.",
        _derived_from(facts),
        f"Training run: `{facts.run_id}`; code version (git commit): "
        f"{'`' + facts.code_version + '`' if facts.code_version else NOT_RECORDED}.",
    ]
    return _bullets(items)


def _derived_from(facts: CardFacts) -> str:
    if facts.parent_hidden:
        return f"Derived from: a model {HIDDEN_LABEL}."
    return f"Derived from: `{facts.parent}`." if facts.parent else "Derived from: no parent model."


def _data(facts: CardFacts) -> str:
    if not facts.dataset:
        return NOT_RECORDED
    steps = " <- ".join(
        step.named if step.hidden else f"{step.named} ({step.op})" for step in facts.dataset
    )
    source = f"`{facts.source}`" if facts.source else NOT_RECORDED
    if facts.dataset[-1].hidden:
        source = f"a dataset version {HIDDEN_LABEL}"
    return _bullets([f"Training data lineage: {steps}.", f"Collected from: {source}."])


def _monitoring(facts: CardFacts) -> str:
    if not facts.serving:
        return NOT_RECORDED
    items = []
    for serving in facts.serving:
        if serving.hidden:
            items.append(f"Served by a deployment {HIDDEN_LABEL}.")
            continue
        objective = serving.latency_objective_ms
        sampled = serving.log_sample_rate
        items.append(
            f"Served by deployment `{serving.deployment}` ({serving.role}, {serving.status}); "
            f"p99 latency objective: {NOT_RECORDED if objective is None else f'{objective} ms'}; "
            f"requests logged for drift and feedback: "
            f"{NOT_RECORDED if sampled is None else f'{sampled:.0%}'}."
        )
    return _bullets(items)


def _risk(facts: CardFacts) -> str:
    items = []
    if facts.notes.get("limitations"):
        items.append("Known limitations: see Limitations.")
    if facts.fairness:
        items.append("Fairness measured: see Fairness.")
    if facts.slices:
        columns = sorted({row.column for row in facts.slices})
        items.append(f"Performance per group ({', '.join(columns)}): see Per slice.")
    return _bullets(items) if items else NOT_RECORDED

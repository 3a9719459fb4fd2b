"""Rich renderings of quality profiles, diffs and transform reports."""

from __future__ import annotations

from typing import Any

from forgeml.cli._output import console, print_table, say


def _number(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _summary(stats: dict[str, Any]) -> str:
    if "mean" in stats:
        return (
            f"min {_number(stats.get('min'))}  max {_number(stats.get('max'))}  "
            f"mean {_number(stats.get('mean'))}  std {_number(stats.get('std'))}"
        )
    if "top" in stats:
        top = stats["top"][:3]
        return "top: " + ", ".join(f"{item['value']!s} ({item['count']})" for item in top)
    return ""


def print_profile(profile: dict[str, Any], schema: dict[str, str]) -> None:
    """Per-column statistics, then duplicates, label balance and splits."""
    rows = [
        (
            name,
            schema.get(name, ""),
            stats["nulls"],
            f"{stats['null_fraction']:.1%}",
            stats.get("distinct", ""),
            _summary(stats),
        )
        for name, stats in profile.get("column_stats", {}).items()
    ]
    print_table("columns", ["column", "type", "nulls", "null %", "distinct", "summary"], rows)
    say(f"duplicate rate: {profile.get('duplicate_rate', 0.0):.2%}")
    if "label_balance" in profile:
        balance = ", ".join(
            f"{label}: {item['count']} ({item['fraction']:.1%})"
            for label, item in profile["label_balance"].items()
        )
        say(f"label balance: {balance}")
    if "splits" in profile:
        say("splits: " + ", ".join(f"{k} {v}" for k, v in profile["splits"].items()))
    if profile.get("augmented"):
        say(f"augmented rows: {profile['augmented']}")


def print_diff(ref_a: str, ref_b: str, changes: dict[str, Any]) -> None:
    """Schema, row-count and statistic changes between two versions."""
    rows = changes["rows"]
    say(f"{ref_a} -> {ref_b}: rows {rows['before']} -> {rows['after']} ({rows['change']:+d})")
    schema = changes["schema"]
    for name, dtype in schema["added"].items():
        say(f"  + column {name} ({dtype})")
    for name, dtype in schema["removed"].items():
        say(f"  - column {name} ({dtype})")
    for name, change in schema["dtype_changed"].items():
        say(f"  ~ column {name}: {change['before']} -> {change['after']}")
    table = [
        (column, stat, _number(values["before"]), _number(values["after"]))
        for column, stats in changes["columns"].items()
        for stat, values in stats.items()
    ]
    if table:
        print_table("statistics that changed", ["column", "statistic", "before", "after"], table)


def print_report(report: dict[str, Any]) -> None:
    """A transform's report, compactly."""
    if report:
        console.print_json(data=report)

"""Tables of `benchmarks/peers.py`'s serving and gateway figures."""

from __future__ import annotations

from typing import Any

KIND_LABELS = {"adult": "adult-mlp :predict", "minilm": "minilm embeddings"}


def serving_lines(figure: dict[str, Any]) -> list[str]:
    """forgeml serve against each peer: req/s and p50 at c1 and c16, and the ratios."""
    lines = [
        f"serving: forgeml serve vs each peer (all three servers up throughout), medians of "
        f"{figure['rounds']} alternating rounds of {figure['seconds']:g} s per point",
        f"  {'peer':10} {'target':20} {'conc':>4} {'forgeml req/s':>14} {'peer req/s':>11} "
        f"{'forgeml p50':>12} {'peer p50':>9} {'rate ratio':>11}",
    ]
    for peer, result in figure["peers"].items():
        if "error" in result:
            lines.append(f"  {peer:10} cannot run here: {result['error']}")
            continue
        for kind, per_kind in result.items():
            for point in ("c1", "c16"):
                found = per_kind[point]
                ours, theirs = found["forgeml"], found[peer]
                lines.append(
                    f"  {peer:10} {KIND_LABELS[kind]:20} {point[1:]:>4} {ours['rps']:>14.1f} "
                    f"{theirs['rps']:>11.1f} {ours['p50_ms']:>10.2f}ms {theirs['p50_ms']:>7.2f}ms"
                    f" {found['rate_ratio']:>10.2f}x"
                )
            if "sustained" in per_kind:
                rates = per_kind["sustained"]
                lines.append(
                    f"  {peer:10} {KIND_LABELS[kind]:20} highest sustained open-loop rate: "
                    f"forgeml {rates['forgeml']['rate']:.0f} req/s, {peer} "
                    f"{rates[peer]['rate']:.0f} req/s "
                    f"({rates['forgeml']['rate'] / max(rates[peer]['rate'], 1e-9):.2f}x)"
                )
    lines.append("  goal: >= 3x each peer's rate at concurrency 1 and 16")
    return lines


def gateway_lines(figure: dict[str, Any]) -> list[str]:
    """Direct, forgeml gateway and LiteLLM: p50, added p50 and the rate lost."""
    lines = ["gateway: MiniLM /v1/embeddings on one replica, direct vs through each gateway"]
    if "litellm_error" in figure:
        lines.append(f"  litellm cannot run here: {figure['litellm_error']}")
    lines.append(
        f"  {'conc':>4} {'path':8} {'rounds':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'added p50':>10} {'rate lost':>10}"
    )
    for label, point in figure["points"].items():
        for path in ("direct", "forgeml", "litellm"):
            if path not in point:
                continue
            row = point[path]
            added = f"{row['added_p50_ms']:>8.2f}ms" if "added_p50_ms" in row else ""
            lost = f"{100 * row['rate_lost']:>9.1f}%" if "rate_lost" in row else ""
            lines.append(
                f"  {label[1:]:>4} {path:8} {point['rounds']:>6} {row['rps']:>8.1f} "
                f"{row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {added:>10} {lost:>10}"
            )
    ratios = figure["ratios"]
    for label in ("c1", "c8"):
        key = f"{label}_added_p50_forgeml_over_litellm"
        if key in ratios and ratios[key] is None:
            theirs = ratios[f"{label}_litellm_added_p50_ms"]
            lines.append(
                f"  {label}: LiteLLM added no measurable p50 ({theirs:.2f} ms), so no share "
                "(goal < 0.1)"
            )
        elif key in ratios:
            lines.append(
                f"  {label}: forgeml adds {ratios[key]:.3f}x what LiteLLM adds (goal < 0.1)"
            )
    if "c8_forgeml_rate_lost" in ratios:
        lost = 100 * ratios["c8_forgeml_rate_lost"]
        met = "met" if lost <= 5.0 else "NOT met"
        lines.append(
            f"  c8: forgeml's gateway loses {lost:.1f}% of the direct rate (goal <= 5%: {met})"
        )
    return lines


# the goals, per headline ratio of `peers.ratios`: key suffix -> (goal text, met)
def _at_least(goal: float) -> tuple[str, Any]:
    return f">= {goal:g}x", lambda value: value >= goal


def headline_lines(ratios: dict[str, Any]) -> list[str]:
    """Each headline ratio beside its goal, met or not (no goal: reported only)."""
    goals: dict[str, tuple[str, Any]] = {
        "trainer_vs_lightning_defaults": _at_least(1.5),
        "data_vs_pandas": _at_least(3.0),
        "data_vs_polars": _at_least(0.8),
        "data_ingest_vs_pandas": _at_least(1.0),
        "gateway_c8_forgeml_rate_lost": ("<= 5%", lambda value: value <= 0.05),
    }
    lines = ["headline (forgeml / peer unless said otherwise):"]
    for key, value in ratios.items():
        if key.endswith(("_goal_met", "_under_a_tenth")) or isinstance(value, bool):
            continue
        if key.endswith("_error"):
            lines.append(f"  {key:52} cannot run here: {value}")
            continue
        goal, met = goals.get(key, ("", None))
        if "_c1_rate_vs_" in key or "_c16_rate_vs_" in key:
            goal, met = _at_least(3.0)
        if key.endswith("_added_p50_forgeml_over_litellm"):
            goal, met = "< 0.1x", lambda v: v is not None and v < 0.1
        shown = "n/a" if value is None else f"{value:.3f}"
        verdict = "" if met is None else ("met" if met(value) else "NOT met")
        lines.append(f"  {key:52} {shown:>9} {goal:>7} {verdict}")
    return lines

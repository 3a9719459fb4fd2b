"""The DAG of a pipeline: a stable topological order, the first cycle, a text drawing.

Pure functions over `{step: [steps it needs]}` in file order; no I/O.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path


def find_cycle(needs: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle as the steps along it, first repeated last (`[a, b, a]`), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for dependency in needs.get(name, ()):
            if state.get(dependency) == 1:
                return [*path[path.index(dependency) :], dependency]
            if dependency not in state:
                found = visit(dependency)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in needs:
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def topological_order(needs: Mapping[str, Sequence[str]]) -> list[str]:
    """Every step after the steps it needs; among ready steps, file order (no cycles)."""
    order: list[str] = []
    done: set[str] = set()
    remaining = list(needs)
    while remaining:
        ready = next(name for name in remaining if all(d in done for d in needs[name]))
        order.append(ready)
        done.add(ready)
        remaining.remove(ready)
    return order


def dependents(needs: Mapping[str, Sequence[str]], name: str) -> set[str]:
    """Every step that needs `name`, directly or through others."""
    found: set[str] = set()
    frontier = [name]
    while frontier:
        current = frontier.pop()
        for step, wanted in needs.items():
            if current in wanted and step not in found:
                found.add(step)
                frontier.append(step)
    return found


def ancestors(needs: Mapping[str, Sequence[str]], name: str) -> set[str]:
    """Every step `name` needs, directly or through others."""
    found: set[str] = set()
    stack = list(needs[name])
    while stack:
        step = stack.pop()
        if step not in found:
            found.add(step)
            stack.extend(needs[step])
    return found


def depths(needs: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Each step's depth: 0 for a step that needs nothing, else 1 + its deepest need."""
    depth: dict[str, int] = {}
    for name in topological_order(needs):
        depth[name] = 1 + max((depth[d] for d in needs[name]), default=-1)
    return depth


def render_text(
    needs: Mapping[str, Sequence[str]],
    kinds: Mapping[str, str],
    states: Mapping[str, str] | None = None,
) -> str:
    """One line per step in run order: its depth, name, kind, state (a run's) and needs."""
    depth = depths(needs)
    lines = []
    for name in topological_order(needs):
        state = f" {states[name]}" if states and name in states else ""
        after = f"  <- {', '.join(needs[name])}" if needs[name] else ""
        lines.append(f"{'  ' * depth[name]}{name} ({kinds[name]}){state}{after}")
    return "\n".join(lines)


# a run's step states as colours (a file's steps have none: grey)
_COLOURS = {"SUCCEEDED": "#b7e4c7", "FAILED": "#f4a6a6", "SKIPPED": "#e0e0e0"}


def render_image(
    needs: Mapping[str, Sequence[str]],
    kinds: Mapping[str, str],
    path: Path,
    states: Mapping[str, str] | None = None,
) -> None:
    """Draw the DAG to `path` (.svg or .png, by its suffix), written atomically.

    Steps stand in columns by depth, an arrow from each step to each step that needs it;
    a run's steps are coloured by state ("SUCCEEDED (cached)" counts as succeeded).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depth = depths(needs)
    columns: dict[int, list[str]] = {}
    for name in topological_order(needs):
        columns.setdefault(depth[name], []).append(name)
    where = {
        name: (column * 3.0, -row * 1.4)
        for column, names in columns.items()
        for row, name in enumerate(names)
    }
    tallest = max(len(names) for names in columns.values())
    figure, axis = plt.subplots(figsize=(2.6 * len(columns) + 1, 1.1 * tallest + 1))
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text stays text in the SVG
        for name, (x, y) in where.items():
            for need in needs[name]:
                axis.annotate(
                    "", xy=(x - 1.0, y), xytext=(where[need][0] + 1.0, where[need][1]),
                    arrowprops={"arrowstyle": "->", "color": "#555555"},
                )  # fmt: skip
            state = (states or {}).get(name, "")
            colour = _COLOURS.get(state.split(" ")[0], "#dbe9f6")
            label = f"{name}\n{kinds[name]}" + (f"\n{state.lower()}" if state else "")
            axis.text(
                x, y, label, ha="center", va="center", fontsize=9,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": colour, "edgecolor": "#555555"},
            )  # fmt: skip
        xs = [x for x, _ in where.values()]
        ys = [y for _, y in where.values()]
        axis.set_xlim(min(xs) - 1.5, max(xs) + 1.5)
        axis.set_ylim(min(ys) - 1.0, max(ys) + 1.0)
        axis.axis("off")
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.part{path.suffix}")
        figure.savefig(temp, format=path.suffix.lstrip("."), bbox_inches="tight")
    plt.close(figure)
    os.replace(temp, path)

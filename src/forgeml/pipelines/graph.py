"""The DAG of a pipeline: a stable topological order, the first cycle, a text drawing.

Pure functions over `{step: [steps it needs]}` in file order; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


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


def render_text(needs: Mapping[str, Sequence[str]], kinds: Mapping[str, str]) -> str:
    """One line per step in run order: its depth, name, kind and what it needs."""
    depth: dict[str, int] = {}
    lines = []
    for name in topological_order(needs):
        depth[name] = 1 + max((depth[d] for d in needs[name]), default=-1)
        after = f"  <- {', '.join(needs[name])}" if needs[name] else ""
        lines.append(f"{'  ' * depth[name]}{name} ({kinds[name]}){after}")
    return "\n".join(lines)

"""PNG plots for people (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path


def plot_curves(curves: dict[str, dict[str, list[tuple[int, float]]]], path: Path) -> None:
    """One panel per metric, one line per run; written atomically to `path`."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = sorted({key for per_run in curves.values() for key in per_run})
    figure, axes = plt.subplots(
        len(metrics) or 1, 1, figsize=(8, 3 * max(len(metrics), 1)), squeeze=False
    )
    for axis, key in zip(axes[:, 0], metrics, strict=False):
        for label, per_run in curves.items():
            points = per_run.get(key, [])
            if points:
                steps, values = zip(*points, strict=True)
                axis.plot(steps, values, label=label)
        axis.set_title(key)
        axis.set_xlabel("step")
        axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.part.png")
    figure.savefig(temp, dpi=100)
    plt.close(figure)
    os.replace(temp, path)

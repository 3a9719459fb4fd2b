"""How often a no-drift live window flags a column by chance, by window size (issue 13).

Adult as examples/adult/README.md prepares it (benchmarks/_adult.py): the reference is the
train split without the label, as `forgeml monitor drift --model` builds it; each window is
a seeded sample without replacement of the held-out test split, which comes from the same
population, so every flagged column is a false alarm. The default `DriftConfig` judges
each window (p below alpha AND an effect size past its threshold). This is the figure
behind `monitor drift --window`'s default of 2,000 rows.

    PYTHONPATH=src .venv/bin/python benchmarks/drift_windows.py [--quick] [--json]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from _adult import prepare_adult
from _cli import make_parser, print_json

SIZES = (600, 1000, 2000)


def measure(windows: int) -> dict[str, Any]:
    """Windows with any flagged column, and flagged column checks, per window size."""
    from forgeml.data import catalog
    from forgeml.monitor.drift import build_reference, detect_drift

    figures: dict[str, Any] = {"windows": windows, "load_average_1min": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-drift-windows-") as where:
        workspace = prepare_adult(Path(where) / "home")
        try:
            with workspace.store.session() as session:
                version = catalog.resolve(session, "adult")
            train = catalog.read_frame(workspace, version, "train").drop("Y")
            held_out = catalog.read_frame(workspace, version, "test").drop("Y")
        finally:
            workspace.close()
    reference = build_reference(train)
    columns = len(reference.columns)
    figures |= {"reference_rows": train.height, "held_out_rows": held_out.height}
    figures["columns"] = columns
    figures["sizes"] = {}
    for size in SIZES:
        flagged_windows = flagged_checks = 0
        for seed in range(windows):
            report = detect_drift(reference, held_out.sample(size, seed=seed))
            flagged_windows += bool(report.drifted_columns)
            flagged_checks += len(report.drifted_columns)
        figures["sizes"][str(size)] = {
            "windows_with_a_flag": flagged_windows,
            "window_share": flagged_windows / windows,
            "column_check_share": flagged_checks / (windows * columns),
        }
    return figures


def report(figures: dict[str, Any]) -> None:
    print(
        f"no-drift Adult windows from the test split against the train split's reference "
        f"({figures['columns']} columns, {figures['windows']} windows per size, load "
        f"{figures['load_average_1min']:.1f})"
    )
    print(f"  {'window rows':>11} {'windows flagged':>16} {'column checks flagged':>22}")
    for size, found in figures["sizes"].items():
        print(
            f"  {size:>11} {found['windows_with_a_flag']:>9} of {figures['windows']:<4}"
            f" {found['column_check_share']:>21.2%}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, "10 windows per size")
    args = parser.parse_args(argv)
    figures = measure(10 if args.quick else 40)
    report(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Evidently's DataDriftPreset on two Parquet files; run by benchmarks/drift.py.

Runs in benchmarks/.venv-evidently (Evidently is a benchmark peer, never a forgeml
dependency) and prints one JSON object: seconds for `Report.run` (the frames already in
memory), the drifted column count Evidently reports, and its version.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _drifted(result: dict[str, Any]) -> Any:
    """The DriftedColumnsCount metric's value, wherever this version puts it."""
    for metric in result.get("metrics", []):
        name = str(metric.get("metric_id") or metric.get("metric_name") or metric.get("id"))
        if "DriftedColumnsCount" in name:
            return metric.get("value")
    return None


def main() -> int:
    import evidently
    import pandas as pd
    from evidently import Report
    from evidently.presets import DataDriftPreset

    reference = pd.read_parquet(sys.argv[1])
    current = pd.read_parquet(sys.argv[2])
    started = time.perf_counter()
    snapshot = Report([DataDriftPreset()]).run(current, reference)
    seconds = time.perf_counter() - started
    found = _drifted(snapshot.dict())
    print(json.dumps({"seconds": seconds, "drifted": found, "version": evidently.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

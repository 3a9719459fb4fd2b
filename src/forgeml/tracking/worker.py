"""`python -m forgeml.tracking.worker`: the torchrun entry point of a distributed run."""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path

from forgeml.tracking.runner import worker_main


def main() -> None:
    parser = argparse.ArgumentParser(description="One rank of a forgeml training run.")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    from forgeml.train.distributed import exit_rank

    try:
        worker_main(args.run_dir, args.run_id, args.resume)
    except SystemExit as stop:
        exit_rank(stop.code if isinstance(stop.code, int) else 1)
    except BaseException:  # the rank must still end through exit_rank
        traceback.print_exc()
        exit_rank(1)
    exit_rank(0)


if __name__ == "__main__":
    main()

"""What one flush of `rehearsal serve`'s records costs as its run directory grows.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/served_records.py [--parts 10 100 400 1000] [--per-part 8]

A served run directory is written by flushes: each adds a Parquet part, rewrites ``summary.json``
and seals the directory again, and sealing checks every part against the manifest. The recorder
(``episodes/_recorder.py``) grows the directory to each ``--parts`` count, ``--per-part`` records a
part (copies of one reference episode of shop with fresh episode ids), and times, at that size:

* **memoised**: a flush as the server makes it: the facts of parts already checked in this process
  (``records/_facts.py``) and their summary rows are kept, so only the new part is read;
* **cold**: the same flush with both memos emptied first, so every part is read, hashed and summed
  again: what every flush cost before the memos, the obvious alternative.

Printed per size: the median of ``--reps`` flushes of each kind, and cold / memoised.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import rehearsal_env
from rehearsal_env.episodes import Recorder
from rehearsal_env.provenance import provenance_of
from rehearsal_env.records import _facts, read_records
from rehearsal_env.runner import RunConfig, run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", type=int, nargs="+", default=[10, 100, 400, 1000])
    p.add_argument("--per-part", type=int, default=8, help="records in each part (default 8)")
    p.add_argument("--reps", type=int, default=5, help="flushes timed of each kind per size (default 5)")
    args = p.parse_args()
    world = rehearsal_env.load_world("shop")
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-records-") as tmp:
        run(RunConfig(world="shop", agent="reference", scenarios=("refund-item-0001",)), Path(tmp) / "reference")
        (template,) = read_records(Path(tmp) / "reference")
        recorder = Recorder(Path(tmp) / "serve", backend="sqlite", stress=True, flush_every=10**9)
        run_dir = recorder.run_dir("shop", provenance_of(world, None))

        def flush(cold: bool) -> float:
            for _ in range(args.per_part):
                recorder.add(run_dir, replace(template, run_id=run_dir.run_id, episode_id=uuid.uuid4().hex))
            if cold:
                _facts._memo.clear()
                recorder._rows.clear()
            began = time.perf_counter()
            recorder.flush()
            return (time.perf_counter() - began) * 1000

        parts = 0
        print(f"{'parts':>6} {'memoised ms':>12} {'cold ms':>9} {'cold / memoised':>16}")
        for size in sorted(args.parts):
            while parts < size - 2 * args.reps:
                flush(cold=False)
                parts += 1
            warm = statistics.median(flush(cold=False) for _ in range(args.reps))
            cold = statistics.median(flush(cold=True) for _ in range(args.reps))
            parts += 2 * args.reps
            print(f"{size:>6} {warm:>12.1f} {cold:>9.1f} {cold / warm:>15.1f}x", flush=True)


if __name__ == "__main__":
    main()

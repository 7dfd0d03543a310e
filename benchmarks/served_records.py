"""What one flush of `rehearsal serve`'s records costs as its run directory grows, now and at another commit.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/served_records.py [--parts 10 100 400 1000] \\
        [--per-part 8] [--before /work/before]

A served run directory is written by flushes: each adds a Parquet part, enters it in the manifest, rewrites
``summary.json`` and seals the directory again. The recorder (``episodes/_recorder.py``) grows the directory
to each ``--parts`` count, ``--per-part`` records a part (copies of one reference episode of shop with fresh
episode ids), and times ``--reps`` flushes at that size, as the server makes them (one long-lived process).

``--before DIR`` runs the same measurement first in a child process importing the package from ``DIR`` (a
checkout of the commit before, e.g. ``git worktree add /work/before <commit>``): the obvious alternative,
side by side. Printed per size: the median flush in ms of each (wall time, and this process's CPU time, which
leaves out the waits on fsync: on a loaded disk those vary from flush to flush whatever the directory holds),
and before / now. A flush that does not grow with the directory shows the same figure at every size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path


def measure(sizes: list[int], per_part: int, reps: int) -> dict[int, tuple[float, float]]:
    """Median flush ms at each size (wall, and this process's CPU), with the package this process imports."""
    import rehearsal_env
    from rehearsal_env.episodes import Recorder
    from rehearsal_env.provenance import provenance_of
    from rehearsal_env.records import read_records
    from rehearsal_env.runner import RunConfig, run

    world = rehearsal_env.load_world("shop")
    out: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="rehearsal-bench-records-") as tmp:
        run(RunConfig(world="shop", agent="reference", scenarios=("refund-item-0001",)), Path(tmp) / "reference")
        (template,) = read_records(Path(tmp) / "reference")
        recorder = Recorder(Path(tmp) / "serve", backend="sqlite", stress=True, flush_every=10**9)
        run_dir = recorder.run_dir("shop", provenance_of(world, None))

        def flush() -> tuple[float, float]:
            for _ in range(per_part):
                recorder.add(run_dir, replace(template, run_id=run_dir.run_id, episode_id=uuid.uuid4().hex))
            began, cpu = time.perf_counter(), time.process_time()
            recorder.flush()
            return (time.perf_counter() - began) * 1000, (time.process_time() - cpu) * 1000

        parts = 0
        for size in sorted(sizes):
            while parts < size - reps:
                flush()
                parts += 1
            timed = [flush() for _ in range(reps)]
            out[size] = statistics.median(t[0] for t in timed), statistics.median(t[1] for t in timed)
            parts += reps
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", type=int, nargs="+", default=[10, 100, 400, 1000])
    p.add_argument("--per-part", type=int, default=8, help="records in each part (default 8)")
    p.add_argument("--reps", type=int, default=9, help="flushes timed per size (default 9)")
    p.add_argument("--before", type=Path, help="a checkout of the commit before, measured first in a child process")
    p.add_argument("--json", type=Path, help=argparse.SUPPRESS)  # the child's figures
    args = p.parse_args()
    before: dict[int, tuple[float, float]] = {}
    if args.before is not None:
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            env = {**os.environ, "PYTHONPATH": str(args.before.resolve())}
            subprocess.run([sys.executable, __file__, "--parts", *map(str, args.parts), "--per-part",
                            str(args.per_part), "--reps", str(args.reps), "--json", tmp.name],
                           env=env, cwd=args.before, check=True)
            before = {int(k): (v[0], v[1]) for k, v in json.loads(Path(tmp.name).read_text()).items()}
    now = measure(args.parts, args.per_part, args.reps)
    if args.json is not None:
        args.json.write_text(json.dumps(now))
        return
    print(f"{'parts':>6} {'before ms':>10} {'now ms':>8} {'before / now':>13} {'before cpu ms':>14} {'now cpu ms':>11} "
          f"{'before / now':>13}")
    for size in sorted(now):
        b = before.get(size)
        wall, cpu = now[size]
        print(f"{size:>6} {'-' if b is None else f'{b[0]:.1f}':>10} {wall:>8.1f} "
              f"{'-' if b is None else f'{b[0] / wall:.1f}x':>13} {'-' if b is None else f'{b[1]:.1f}':>14} "
              f"{cpu:>11.1f} {'-' if b is None else f'{b[1] / cpu:.1f}x':>13}", flush=True)


if __name__ == "__main__":
    main()

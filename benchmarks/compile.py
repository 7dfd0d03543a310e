"""Wall time per phase of the world compiler on the reviews application (or django-helpdesk), without a model.

Usage::

    flock /tmp/bench.lock .venv/bin/python benchmarks/compile.py [--reps 3] [--app reviews|helpdesk]

Each repetition compiles ``worlds/reviews`` (described by ``tests/compile_sources/reviews/app.toml``), or with
``--app helpdesk`` django-helpdesk from PyPI (the ``compile-helpdesk`` extra, run by the host project in
``tests/compile_sources/helpdesk``; its inspect phase runs the application's own migrations), into a
fresh folder: a *cold* compile (every phase runs; the process's PostgreSQL server is already up after the
first), then compiles the same folder again (*resumed*: every phase after inspect is skipped). It prints
the median seconds of each phase, the whole compile against the goal (at most 5 minutes on this 2-core
machine), the jobs validated and the kinds of write, and whether every repetition gave the same world
version (a compile without a model is byte-identical run to run). The first repetition also pays the
private PostgreSQL server's start; it is shown apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rehearsal_env.compiler import PHASES, compile_world  # noqa: E402

GOAL_S = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--app", choices=("reviews", "helpdesk"), default="reviews")
    parser.add_argument("--runtime", choices=("auto", "docker", "local"), default=None,
                        help="where the application runs (default: the description's; auto takes the sandbox "
                             "where a Docker daemon answers)")
    args = parser.parse_args()
    source, describe = ROOT / "worlds" / "reviews", ROOT / "tests" / "compile_sources" / "reviews" / "app.toml"
    if args.app == "helpdesk":
        source = ROOT / "tests" / "compile_sources" / "helpdesk"
        describe = source / "app.toml"
    cold: list[dict[str, float]] = []
    totals, resumed, versions, first = [], [], set(), 0.0
    summary: dict[str, Any] = {}
    summary_runtime = ""
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        for rep in range(args.reps):
            out = Path(tmp) / f"rep{rep}"
            started = time.perf_counter()
            result = compile_world(source, out, describe=describe, runtime=args.runtime)
            total = time.perf_counter() - started
            if rep == 0:
                first = total
            cold.append(result.seconds)
            totals.append(total)
            versions.add(result.summary["world_version"])
            summary, summary_runtime = result.summary, result.phases["plan"]["runtime"]
            started = time.perf_counter()
            again = compile_world(source, out, describe=describe, runtime=args.runtime)
            resumed.append(time.perf_counter() - started)
            assert again.skipped == PHASES[1:], again.skipped
    print(f"world compile, {args.app}, no model, runtime {summary_runtime}: {args.reps} repetition(s); median seconds "
          "per phase (cold compile)")
    for phase in PHASES:
        print(f"  {phase:<12} {statistics.median(c[phase] for c in cold):8.2f}")
    warm = totals[1:] or totals
    print(f"  {'whole':<12} {statistics.median(warm):8.2f}   (first, with the PostgreSQL server's start: {first:.2f}; "
          f"goal <= {GOAL_S:.0f}: {'met' if max(totals) <= GOAL_S else 'NOT met'})")
    print(f"  {'resumed':<12} {statistics.median(resumed):8.2f}   (every phase after inspect skipped)")
    print(f"jobs validated: {summary['jobs']}, kept out: {summary['kept_out']}, kinds of write: "
          f"{len(summary['kinds_of_write'])} ({', '.join(summary['kinds_of_write'])}), splits {summary['splits']}")
    same = "the same every time" if len(versions) == 1 else "DIFFERS"
    print(f"world version: {', '.join(sorted(versions))} ({same})")
    return 0 if len(versions) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())

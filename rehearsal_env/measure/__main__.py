"""``python -m rehearsal_env.measure``: the coverage study's table (same as ``measure.py --coverage-study``)."""

from __future__ import annotations

import argparse
import sys

from ._coverage import coverage_study, format_coverage


def main(argv: list[str] | None = None) -> int:
    """Run the coverage study and print its table."""
    p = argparse.ArgumentParser(prog="python -m rehearsal_env.measure", description=__doc__)
    p.add_argument("--replicates", type=int, default=2000, help="simulated suites per cell (default 2000)")
    p.add_argument("--seed", type=int, default=12, help="seed (default 12)")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = p.parse_args(argv)
    study = coverage_study(replicates=args.replicates, seed=args.seed)
    print(format_coverage(study, markdown=args.markdown))
    return 1 if any(c.status == "UNEXPECTED" for c in study.cells) else 0


if __name__ == "__main__":
    sys.exit(main())

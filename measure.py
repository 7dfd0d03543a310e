"""measure.py: the numbers of one run, or the comparison of two, with intervals and the floor.

    python measure.py RUN_DIR                 headline numbers with 95% CIs, pass^k / pass@k, floor
    python measure.py RUN_A RUN_B             the same for both, then A vs B paired by scenario
    python measure.py ... --json              the same as JSON
    python measure.py ... --plot FILE.png     also draw per-scenario outcomes, and FILE.cost-reliability.png:
                                              every checkpoint's cost against accuracy (Pareto front) and pass^k
    python measure.py ... --price IN,OUT      prices per million input and output tokens (default: the profile's)
    python measure.py --coverage-study        simulate: do the 95% intervals cover, does the floor hold?
    python measure.py --sequential-study      simulate: rehearsal compare's error under continuous monitoring,
                                              and the episodes it saves against a fixed design
    python measure.py --adaptive-study        the same with informative selection (rehearsal compare --select)
    python measure.py --noise-study           the noise split by source from forked resamples, on a model whose
                                              true shares are known (--plot FILE.png draws it)
    python measure.py RUN_DIR --noise-sources the noise of a model agent's run split by source: its episodes
                                              forked at --fork-turn, --branches per source resampling the agent,
                                              the customer, the faults, or all (--bases, --base-url, --plot)

Runs whose provenance differs are refused (naming the fields) unless --force is given. Only root
episodes (begun at reset) are measured: forks and restores are never evidence about the agent, and
each report prints how many were left out. The statistics live in :mod:`rehearsal_env.measure`;
this file only parses arguments and prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from rehearsal_env.measure import (
    NoisePlan,
    ProvenanceMismatch,
    RunError,
    adaptive_study,
    compare,
    coverage_study,
    format_adaptive,
    format_comparison,
    format_coverage,
    format_noise,
    format_report,
    format_sequential,
    load_run,
    noise_of_run,
    noise_shares,
    parse_prices,
    plot_cost_reliability,
    plot_noise,
    plot_runs,
    select_agent,
    sequential_study,
    simulated_branches,
    summarize,
    to_json,
    true_shares,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="measure.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_a", metavar="RUN_DIR", nargs="?",
                   help="run directory (episodes.parquet, provenance.json)")
    p.add_argument("run_b", metavar="RUN_B", nargs="?", help="second run directory to compare against")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--plot", metavar="FILE.png", help="draw per-scenario outcomes into this PNG")
    p.add_argument("--price", metavar="IN,OUT",
                   help="prices per million input and output tokens (default: the agent profile's [price])")
    p.add_argument("--agent", help="the agent to measure when a run holds several")
    p.add_argument("--split", help="only scenarios of this split (train, dev, holdout)")
    p.add_argument("--force", action="store_true", help="compare even when provenance differs (warns)")
    p.add_argument("--coverage-study", action="store_true",
                   help="run the seeded coverage study of the intervals and the floor, print its table")
    p.add_argument("--sequential-study", action="store_true",
                   help="run the seeded study of sequential comparisons (rehearsal compare), print its tables")
    p.add_argument("--adaptive-study", action="store_true",
                   help="run the seeded study of sequential comparisons choosing informative scenarios, print it")
    p.add_argument("--noise-study", action="store_true",
                   help="estimate each noise source's share from simulated forked resamples, beside the true shares")
    p.add_argument("--noise-sources", action="store_true",
                   help="split RUN_DIR's outcome variance by source, from forked resamples of its episodes")
    p.add_argument("--bases", type=int, default=20, help="noise sources: base episodes (the run's first N)")
    p.add_argument("--branches", type=int, default=4, help="noise sources: branches per source and base")
    p.add_argument("--fork-turn", type=int, default=0, help="noise sources: the turn the branches part after")
    p.add_argument("--base-url", help="noise sources: where the run's model is served now (default: the run's)")
    p.add_argument("--replicates", type=int, default=2000, help="coverage study: simulated suites per cell")
    p.add_argument("--seed", type=int, default=12, help="coverage study: seed")
    p.add_argument("--markdown", action="store_true", help="coverage study: Markdown tables")
    return p


def _noise_study(seed: int, plot: str | None) -> int:
    """Print the estimated and true shares of three simulated designs (600 bases, 6 branches per source)."""
    designs = [({"agent": 1.0, "customer": 0.6, "faults": 0.3}, 1.0, 0.0),
               ({"agent": 0.2, "customer": 1.2, "faults": 0.5}, 0.5, 0.02),
               ({"agent": 0.5, "customer": 0.0, "faults": 1.0}, 1.5, 0.05)]
    rng = np.random.default_rng(seed)
    for n, (sd, level, lost) in enumerate(designs):
        shares = noise_shares(simulated_branches(rng, 600, 6, sd, level, lost), seed=seed)
        print(f"design {n + 1}: source sd {sd}, scenario level sd {level}, not scored {lost:.0%}")
        print(format_noise(shares, true_shares(sd, level)))
        if plot and n == 0:
            plot_noise(shares, plot, "simulated design 1: estimated shares")
    return 0


def _noise_sources(args: argparse.Namespace) -> int:
    """Play the forked resamples of a run's first --bases episodes and print each source's share."""
    plan = NoisePlan(branches=args.branches, fork_turn=args.fork_turn, seed=args.seed)
    branches = noise_of_run(args.run_a, bases=args.bases, plan=plan, base_url=args.base_url,
                            progress=lambda done, n: print(f"  base {done}/{n}", file=sys.stderr, flush=True))
    means = {name: float(np.nanmean(v)) for name, v in branches.items()}
    print(f"{args.run_a}: {len(branches['all'])} base episodes forked after turn {plan.fork_turn}, "
          f"{plan.branches} branches per source; verified share per source's branches: "
          + ", ".join(f"{k} {v:.3f}" for k, v in means.items()))
    shares = noise_shares(branches, seed=args.seed)
    print(format_noise(shares))
    if args.plot:
        plot_noise(shares, args.plot, f"{Path(args.run_a).name}: outcome variance by source")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for unusable input or refused comparisons)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.coverage_study:
        study = coverage_study(replicates=args.replicates, seed=args.seed)
        print(format_coverage(study, markdown=args.markdown))
        return 1 if any(c.status == "UNEXPECTED" for c in study.cells) else 0
    if args.sequential_study:
        seq = sequential_study(replicates=args.replicates, seed=args.seed)
        print(format_sequential(seq, markdown=args.markdown))
        return 1 if any(c.sequential > 0.05 for c in seq.nulls) else 0
    if args.noise_study:
        return _noise_study(args.seed, args.plot)
    if args.adaptive_study:
        adaptive = adaptive_study(replicates=args.replicates, seed=args.seed)
        print(format_adaptive(adaptive, markdown=args.markdown))
        return 1 if any(c.error > 0.05 for c in adaptive.nulls) else 0
    if args.run_a is None:
        parser.error("expected RUN_DIR (or --coverage-study, --sequential-study, --adaptive-study)")
    if args.noise_sources:
        try:
            return _noise_sources(args)
        except ValueError as exc:
            print(f"measure.py: error: {exc}", file=sys.stderr)
            return 2
    try:
        prices = parse_prices(args.price) if args.price else None
        runs_a = load_run(args.run_a, split=args.split)
        if args.run_b is None:
            chosen = runs_a if args.agent is None else [select_agent(runs_a, args.agent, args.run_a)]
            reports = [summarize(r, prices) for r in chosen]
            print(to_json({"runs": reports}) if args.json else "\n\n".join(format_report(r) for r in reports))
            if args.plot:
                plot_runs(chosen[:1], reports[:1], args.plot)
                plot_cost_reliability(reports, _sibling(args.plot))
            return 0
        a = select_agent(runs_a, args.agent, args.run_a)
        b = select_agent(load_run(args.run_b, split=args.split), args.agent, args.run_b)
        comparison = compare(a, b, force=args.force)
    except (RunError, ProvenanceMismatch, ValueError) as e:
        print(f"measure.py: {e}", file=sys.stderr)
        return 2
    if comparison.provenance_differs:
        print(f"measure.py: WARNING: provenance differs in {', '.join(comparison.provenance_differs)}; "
              "comparing anyway because of --force", file=sys.stderr)
    reports = [summarize(a, prices), summarize(b, prices)]
    if args.json:
        print(to_json({"runs": reports, "comparison": comparison}))
    else:
        print("\n\n".join([*(format_report(r) for r in reports), format_comparison(comparison)]))
    if args.plot:
        plot_runs([a, b], reports, args.plot, comparison)
        plot_cost_reliability(reports, _sibling(args.plot))
    return 0


def _sibling(plot: str) -> str:
    """FILE.png -> FILE.cost-reliability.png, the second figure --plot draws."""
    path = Path(plot)
    return str(path.with_name(f"{path.stem}.cost-reliability{path.suffix or '.png'}"))


if __name__ == "__main__":
    sys.exit(main())

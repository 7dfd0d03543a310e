"""``rehearsal compare A B``: play two agents on the same scenarios in paired batches until it is decided."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

from ..backends import BACKENDS
from ..measure import (
    BATCH_PAIRS,
    BUDGET,
    BUDGET_MULTIPLE,
    DESIGN_REPEATS,
    DIFFERENCE,
    NOT_DECIDED,
    SELECT,
    SEQUENTIAL_FILE,
    SEQUENTIAL_METHOD,
    SEQUENTIAL_REFERENCE,
    Look,
    SequentialResult,
    compare_sequentially,
)
from ..records import read_records
from ..runner import RunConfig
from ..worlds import backend_for, load_world
from ._models import add_model_options, with_model_options


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "compare", help="decide A vs B sequentially: paired batches until the difference is decided",
        description="Play agents A and B on the same scenarios in paired batches (a seeded order, every scenario "
                    "before any repeats) and stop as soon as an anytime-valid 95% interval of the verified-rate "
                    "difference A - B excludes 0, lies inside +-floor, or the budget is spent. Writes OUT/A and "
                    f"OUT/B, two ordinary runs marked {SEQUENTIAL_FILE}; `python measure.py OUT/A OUT/B` reads them.")
    p.add_argument("agent_a", metavar="A", help="agent A: reference, null, wrong:<name>, openai:MODEL or a profile")
    p.add_argument("agent_b", metavar="B", help="agent B, the same kinds")
    p.add_argument("--world", required=True, help="world name (see `rehearsal world list`)")
    p.add_argument("--split", choices=("train", "dev", "holdout"), help="only this split (default: all)")
    p.add_argument("--max-episodes", type=int, metavar="N",
                   help=f"budget: most episodes per agent (default: {BUDGET_MULTIPLE} x scenarios x --repeats)")
    p.add_argument("--repeats", type=int, default=DESIGN_REPEATS, metavar="K",
                   help=f"the fixed design this replaces, every scenario K times; its resolution floor is the "
                        f"'no difference this suite could resolve' bound (default: {DESIGN_REPEATS})")
    p.add_argument("--floor", type=float, help="use this floor instead of estimating it from the pairs so far")
    p.add_argument("--batch-size", type=int, default=BATCH_PAIRS, metavar="PAIRS",
                   help=f"pairs per batch; the interval is looked at after each (default: {BATCH_PAIRS})")
    p.add_argument("--order-seed", type=int, default=0, help="seed of the play order (default: 0)")
    p.add_argument("--select", choices=SELECT, default="informative",
                   help="informative (default): after one round in the seeded order, play the scenarios that can "
                        "tell A from B (those both always pass or always fail fade out); order: the seeded order")
    p.add_argument("--earlier", action="append", default=[], metavar="RUN_DIR",
                   help="an earlier run of the world whose pass rates seed the informative choice, which then "
                        "chooses from the first pair on, with no seeded round (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="base reset seed; repeat k resets with seed + k (default: 0)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="database backend (default: what the world's tools need)")
    p.add_argument("--out", help="directory for the two runs, OUT/A and OUT/B (default: runs/compare-<id>)")
    add_model_options(p)
    p.set_defaults(handler=handle)


def _floor(look: Look) -> str:
    return "unknown (every pair so far a tie)" if look.floor is None else f"{look.floor:.3f}"


def _bounds(look: Look) -> str:
    """The two extremes of the not-scored pairs, printed beside the interval of the scored ones ('' when none)."""
    if look.worst is None or look.best is None:
        return ""
    return f"; {look.not_scored_pairs} pair(s) with a not-scored episode: {_extremes(look)}"


def _extremes(look: Look) -> str:
    """A - B, its interval and decision with the not-scored episodes as failures of A, and as successes."""
    if look.worst is None or look.best is None:
        return ""
    (we, wl, wh, wd), (be, bl, bh, bd) = look.worst, look.best
    return (f"as failures of A {we:+.3f} [{wl:+.3f}, {wh:+.3f}]{' ' + wd if wd else ''}, as successes of A "
            f"{be:+.3f} [{bl:+.3f}, {bh:+.3f}]{' ' + bd if bd else ''}")


def _line(look: Look, episodes: int) -> str:
    return (f"  {episodes:>5} episodes each, {look.pairs:>5} pairs: A - B = {look.estimate:+.3f}, anytime-valid 95% "
            f"[{look.low:+.3f}, {look.high:+.3f}], floor {_floor(look)}, e-value {look.e_value:.3g}{_bounds(look)}"
            + (f"  => {look.decision}" if look.decision else ""))


def _causes(result: SequentialResult) -> str:
    """Cause -> not-scored episodes of both runs, from their records."""
    counts: dict[str, int] = {}
    for run in (result.run_a, result.run_b):
        for r in read_records(run):
            if r.outcome == "not_scored":
                cause = str(getattr(r, "not_scored_cause", None) or "unknown")
                counts[cause] = counts.get(cause, 0) + 1
    return ", ".join(f"{c} {k}" for c, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def handle(args: argparse.Namespace) -> int:
    if args.max_episodes is not None and args.max_episodes < 1:
        raise ValueError(f"expected --max-episodes >= 1, got {args.max_episodes}")
    if args.repeats < 1 or args.batch_size < 1:
        raise ValueError(f"expected --repeats >= 1 and --batch-size >= 1, got {args.repeats} and {args.batch_size}")
    if args.floor is not None and not 0 < args.floor < 2:
        raise ValueError(f"expected --floor in (0, 2) (a difference of verified rates), got {args.floor}")
    backend = args.backend or backend_for(load_world(args.world))
    configs = [with_model_options(RunConfig(world=args.world, agent=agent, split=args.split, seed=args.seed,
                                            backend=backend), args)
               for agent in (args.agent_a, args.agent_b)]
    out = Path(args.out or Path("runs") / f"compare-{uuid.uuid4().hex[:12]}")
    print(f"compare A = {args.agent_a} vs B = {args.agent_b} on world {args.world} "
          f"(split {args.split or 'all'}): {SEQUENTIAL_METHOD}")
    result = compare_sequentially(configs[0], configs[1], out, max_episodes=args.max_episodes,
                                  design_repeats=args.repeats, floor=args.floor, batch_pairs=args.batch_size,
                                  order_seed=args.order_seed, on_look=lambda look, n: print(_line(look, n)),
                                  select=args.select, earlier=args.earlier)
    final = result.final
    if final is None:
        print(f"no pair was scored in both runs in {result.episodes} episodes each: nothing decided")
    elif result.decision == DIFFERENCE:
        hi, lo = ("A", "B") if final.estimate > 0 else ("B", "A")
        print(f"decided after {result.episodes} of {result.budget} episodes each: {hi}'s verified rate is higher "
              f"than {lo}'s (A - B = {final.estimate:+.3f}, anytime-valid 95% interval "
              f"[{final.low:+.3f}, {final.high:+.3f}])")
    elif result.decision == NOT_DECIDED:
        print(f"not decided: {result.left_out} pair(s) with an episode not scored ({_causes(result)}), which "
              f"decide differently counted as the worst and as the best outcome for A: {_extremes(final)}. The "
              "scored pairs "
              f"alone: A - B = {final.estimate:+.3f}, anytime-valid 95% interval [{final.low:+.3f}, {final.high:+.3f}]"
              "; fix the failing part and compare again")
    elif result.decision == BUDGET:
        print(f"budget spent ({result.budget} episodes each) without a decision: A - B = {final.estimate:+.3f}, "
              f"anytime-valid 95% interval [{final.low:+.3f}, {final.high:+.3f}]; neither a difference nor one "
              f"within the floor ({_floor(final)}) is shown")
    else:
        print(f"decided after {result.episodes} of {result.budget} episodes each: no difference this suite could "
              f"resolve; the anytime-valid 95% interval [{final.low:+.3f}, {final.high:+.3f}] lies inside "
              f"+-{_floor(final)}, the floor")
    if result.left_out:
        print(f"{result.left_out} pair(s) left out: an episode of the pair was not scored")
    if result.not_root:
        print(f"{result.not_root} pair(s) left out: an episode of the pair was a fork or restore, never evidence "
              "about the agent")
    print(f"wrote {result.run_a} and {result.run_b} (measure them with `python measure.py {result.run_a} "
          f"{result.run_b}`)\nmethod: {SEQUENTIAL_REFERENCE}")
    return 0

"""``rehearsal improve RUN_DIR... --agent-profile NAME``: the next version of an agent profile from its failures.

It reads only the failed train and dev episodes of the profile's version in the runs (never
holdout), writes lessons into the instructions (a model writes them with ``--model``; otherwise
a deterministic rule-based writer does, from the check and rule names) and registers the next
version with its lineage.
"""

from __future__ import annotations

import argparse
import json

from ..agents import Endpoint, ProfileStore
from ..improve import ModelWriter, RuleWriter, improve
from ._renamed import add_renamed


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("improve", help="the next version of an agent profile, from failed train and dev episodes",
                       description="Read the failed train and dev episodes of an agent profile's version in the "
                       "runs (never holdout), write lessons into its instructions, and register the next version "
                       "with its lineage (parent version, run ids, episode keys read).")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (with episodes.parquet/)")
    p.add_argument("--agent-profile", metavar="NAME[@vN]",
                   help="the registered agent profile to improve (NAME: its latest version; required)")
    add_renamed(p, "--profile", "--agent-profile", metavar="NAME[@vN]")
    p.add_argument("--model", help="a model writes the lessons (default: the rule-based writer)")
    p.add_argument("--base-url", help="the model's OpenAI-compatible API (default: the SDK's)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="the variable holding the API key")
    p.add_argument("--profiles", metavar="DIR",
                   help="the profile store (default: $REHEARSAL_AGENT_PROFILES, else $REHEARSAL_HOME/agent_profiles)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    writer = (ModelWriter(args.model, Endpoint(base_url=args.base_url, api_key_env=args.api_key_env))
              if args.model else RuleWriter())
    if args.agent_profile is None:
        raise ValueError("expected --agent-profile NAME[@vN]: the registered agent profile to improve "
                         "(see `rehearsal profile list`)")
    result = improve(args.run_dirs, args.agent_profile, writer=writer, store=ProfileStore(args.profiles))
    if args.json:
        print(json.dumps({"parent": result.parent.ref, "profile": result.profile.ref if result.profile else None,
                          "episodes": result.episodes, "failures": len(result.failures), "reason": result.reason,
                          "lineage": json.loads(result.lineage.to_json()) if result.lineage else None}, indent=2))
        return 0
    if result.profile is None or result.lineage is None:
        print(f"{result.parent.ref}: {result.reason}")
        return 0
    print(f"wrote {result.profile.ref} from {result.parent.ref}: {len(result.failures)} failed train/dev "
          f"episode(s) of {result.episodes} read in {len(result.lineage.runs)} run(s); lessons by "
          f"{result.lineage.writer}:")
    for lesson in result.lineage.lessons:
        print(f"  - {lesson}")
    return 0

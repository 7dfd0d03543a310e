"""``rehearsal eval rescore|schema|verify``: re-grade a stored run from its records; print the record schema;
check a run directory's records."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..provenance import OUTCOME_PROFILE
from ..records import SEAL_FILE, read_records, schema_text, trusted_keys, verify_run_dir, verify_seal
from ..rescore import rescore_run
from ._renamed import add_reward_profile


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("eval", help="re-grade stored runs; describe episode records")
    esub = p.add_subparsers(dest="eval_command", required=True, metavar="EVAL_COMMAND")
    rescore = esub.add_parser(
        "rescore", help="re-grade a stored run under a reward profile, from its records alone",
        description="Apply a reward profile to a run's stored episode records (no database, application or "
                    "model provider is touched) and write the rescored run to --out. Under the profile the "
                    "run was scored with, every reward comes out identical; exit code 1 says otherwise.")
    rescore.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (episodes.parquet/, provenance.json)")
    add_reward_profile(rescore, help=f"benchmark, rl, or {OUTCOME_PROFILE} (the 1 / 0 / -1 outcome reward; required)")
    rescore.add_argument("--out", metavar="DIR",
                         help="where to write the rescored run (default: RUN_DIR/rescore-PROFILE)")
    rescore.add_argument("--recheck", action="store_true",
                         help="also rebuild each episode's end state (world snapshot + stored row changes, on "
                              "embedded SQLite) and run its checks again; exit 1 if a verdict differs")
    rescore.add_argument("--versions", metavar="DIR",
                         help="published world versions, where --recheck takes the checks from (default: "
                         "$REHEARSAL_WORLD_VERSIONS, else $REHEARSAL_HOME/world_versions)")
    rescore.add_argument("--json", action="store_true", help="print the report as JSON")
    rescore.set_defaults(handler=handle_rescore)
    schema = esub.add_parser("schema", help="the episode record schema, every field documented")
    schema.set_defaults(handler=handle_schema)
    verify = esub.add_parser(
        "verify", help="check a run directory's records: every part against the manifest, one run id",
        description="Compare RUN_DIR/episodes.parquet/'s manifest with its files in both directions "
                    "(a part missing, a file not listed, SHA-256, bytes, rows), check that every part reads as "
                    "Parquet of a known record version and that all parts belong to one run, and check the "
                    f"run's seal ({SEAL_FILE}) against the trusted public keys (a key this home distrusts, from the "
                    "seal's recorded time or entirely, is named with its reason). Exit 0 when the records can be "
                    "trusted, 1 otherwise, with one line per problem.")
    verify.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by `rehearsal run`")
    for command in (rescore, verify):
        command.add_argument("--trust", action="append", default=[], metavar="PUBLIC_KEY",
                             help="also accept seals made with this public key (ed25519:...; repeatable); "
                             "`rehearsal keys trust` keeps one for good")
    verify.set_defaults(handler=handle_verify)
    export = esub.add_parser(
        "export", help="write a run's episodes in another trajectory format (ATIF)",
        description="Write each episode record of RUN_DIR as an ATIF v1.8 trajectory (the atif package's models; "
                    "pip install 'rehearsal-env[atif]'), one JSON file per episode, with the verdict, checks and "
                    "provenance in its extra.rehearsal. A holdout scenario's checks are written without their SQL, "
                    "bound values and wanted value unless --holdout-checks. An episode played through "
                    "`rehearsal gateway` carries each model call's prompt and completion token ids and logprobs "
                    "(where the provider returned them), and a line per such episode says whether each call's "
                    "prompt continued the previous call's tokens exactly (the turn-boundary check).")
    export.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (episodes.parquet/)")
    export.add_argument("--format", required=True, choices=("atif",), help="the trajectory format: atif")
    export.add_argument("--out", metavar="DIR", help="where to write the files (default: RUN_DIR/atif)")
    export.add_argument("--holdout-checks", action="store_true",
                        help="include holdout scenarios' check SQL and wanted values (keep such files private)")
    export.set_defaults(handler=handle_export)


def handle_rescore(args: argparse.Namespace) -> int:
    if args.reward_profile is None:
        raise ValueError(f"expected --reward-profile NAME (benchmark, rl or {OUTCOME_PROFILE}): the reward profile "
                         "to re-grade the run under")
    report = rescore_run(args.run_dir, args.reward_profile, args.out, recheck_checks=args.recheck,
                         trusted=trusted_keys(args.trust), versions_root=args.versions)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0 if report.ok else 1

    def mean(v: float | None) -> str:
        return "-" if v is None else f"{v:.4f}"

    print(f"rescored {report.episodes} episodes ({report.scored} scored) of {report.run_dir}")
    print(f"  from {report.from_profile} ({report.from_reward_version}) to {report.profile} "
          f"({report.reward_version})")
    print(f"  identical rewards: {report.identical}/{report.episodes}; changed: {len(report.changed)}")
    print(f"  mean reward: {mean(report.mean_reward_before)} -> {mean(report.mean_reward_after)}")
    if report.same_contract and report.changed:
        print("  ERROR: same contract, different rewards; the scoring changed without a new reward_version:")
        for line in report.changed[:20]:
            print(f"    {line}")
    if report.rechecked:
        print(f"  recheck on rebuilt end states: {report.recheck_agree}/{report.rechecked} verdicts equal the "
              "stored ones")
        for line in report.recheck_differences[:20]:
            print(f"    {line}")
    print(f"wrote {report.out}/ (episodes.parquet/, provenance.json, summary.json, rescore.json)")
    return 0 if report.ok else 1


def handle_verify(args: argparse.Namespace) -> int:
    trusted = trusted_keys(args.trust)
    problems = verify_run_dir(args.run_dir, trusted)
    if not problems:
        seal = verify_seal(args.run_dir, trusted)
        print(f"{args.run_dir}: the records are whole (the manifest matches every file), of one run "
              f"({seal.run_id}, {seal.episodes} episodes, world {seal.world} {seal.world_version}), and sealed "
              f"by trusted key {seal.key.id}{f' ({seal.key.name})' if seal.key.name else ''}"
              f"{f' at {seal.sealed_at.isoformat()}' if seal.sealed_at else ''}")
        return 0
    for line in problems:
        print(line)
    print(f"{len(problems)} problem(s): these records cannot be trusted. A damaged part: `rehearsal run --resume "
          f"{args.run_dir}` plays its episodes again; a changed, grafted or unsealed run: rerun the evaluation")
    return 1


def handle_schema(args: argparse.Namespace) -> int:
    print(schema_text())
    return 0


def handle_export(args: argparse.Namespace) -> int:
    try:  # deferred: the atif models are an optional extra, and every other eval command runs without them
        from ..trajectories import check_boundaries, file_name, gateway_calls, to_trajectory
    except ImportError as exc:
        raise ValueError(f"--format atif needs the atif extra ({exc}); pip install 'rehearsal-env[atif]'") from None
    records = read_records(args.run_dir)
    out = Path(args.out) if args.out else Path(args.run_dir) / "atif"
    out.mkdir(parents=True, exist_ok=True)
    with_calls = 0
    for index, record in enumerate(records):
        calls = gateway_calls(args.run_dir, record)
        document = to_trajectory(record, holdout_checks=args.holdout_checks, calls=calls).to_json_dict()
        name = file_name(index, record)
        (out / name).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        if calls:  # the turn-boundary check of an episode whose model calls the gateway kept
            with_calls += 1
            print(f"{name}: {check_boundaries(calls).describe()}")
    print(f"wrote {len(records)} ATIF trajectories to {out}/ ({with_calls} with the gateway's model calls)")
    return 0

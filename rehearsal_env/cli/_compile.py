"""``rehearsal world compile``: an application's folder becomes a validated world folder.

The compiler (``rehearsal_env.compiler``) is imported by the command itself, so other commands stay quick."""

from __future__ import annotations

import argparse
import json
import os
import sys

PHASES = "inspect, plan, materialize, discover, seed, adapt, author, validate, package"


def register(wsub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = wsub.add_parser("compile", help="compile an application's folder into a validated world, in nine phases",
                        description="Compile SOURCE (the application's folder, with rehearsal-app.toml or "
                        "--describe) into FOLDER/world, a world folder whose jobs each passed the validation gate. "
                        "Each phase writes FOLDER/.compile/NN-phase.json; run again to resume.")
    p.add_argument("source", help="the application's folder")
    p.add_argument("--out", required=True, metavar="FOLDER", help="the compile folder (FOLDER/world, FOLDER/.compile)")
    p.add_argument("--describe", metavar="FILE", help="how the application runs (default SOURCE/rehearsal-app.toml)")
    p.add_argument("--model", help="a model that proposes jobs too (any OpenAI-compatible endpoint)")
    p.add_argument("--base-url", help="the model's endpoint (OpenAI-compatible)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="the variable holding the model's key (default OPENAI_API_KEY; none needed locally)")
    p.add_argument("--seed", type=int, default=0, help="the model's sampling seed (default 0)")
    p.add_argument("--response-format", choices=("json_schema", "json_object", "none"), default="json_schema",
                   help="the answer's form asked of the model's endpoint: the jobs' JSON schema (default), any JSON "
                        "object (an endpoint with JSON mode alone), or none")
    p.add_argument("--max-tokens", type=int, default=4096, help="the longest answer asked of the model (default 4096)")
    p.add_argument("--repairs", type=int, default=2, help="rounds of the repair loop for a model's jobs (default 2)")
    p.add_argument("--stop-after", metavar="PHASE", help="stop once this phase is done (edit its result, rerun): "
                   + PHASES)
    p.add_argument("--publish", action="store_true",
                   help="then publish the world version: `rehearsal world build` on the Docker sandbox (a daemon)")
    p.add_argument("--versions", metavar="DIR", help="where --publish writes (default: the state home's versions)")
    p.add_argument("--runtime", choices=("auto", "docker", "local"),
                   help="where the application runs while compiling: the Docker sandbox, local processes, or auto "
                        "(the sandbox where a daemon answers); default: the description's [application] runtime")
    p.add_argument("--live-agent", metavar="PROFILE",
                   help="then let this agent (openai:MODEL or a registered profile NAME[@vN], served at --base-url) "
                        "try every validated job once: the gate's live attempt, shown on the page (it keeps nothing "
                        "out)")
    p.add_argument("--json", action="store_true", help="print the package phase's result as JSON")
    p.set_defaults(handler=handle_compile, model_timeout=60.0, model_retries=4)


def handle_compile(args: argparse.Namespace) -> int:
    from ..agents import ProviderRefused
    from ..compiler import CompileError, ModelConfig, compile_world, summary_line
    from ._models import live_agent

    model = None
    if args.model:
        model = ModelConfig(args.model, args.base_url, os.environ.get(args.api_key_env) or "none", args.seed,
                            max_tokens=args.max_tokens, response_format=args.response_format)

    def progress(phase: str, how: str, seconds: float) -> None:
        if not args.json:
            print(f"{phase:<12} {how:<8} {seconds:8.2f}s", file=sys.stderr)

    try:
        live = live_agent(args)
    except (ValueError, ProviderRefused) as exc:
        print(f"rehearsal: error: --live-agent: {exc}", file=sys.stderr)
        return 2
    try:
        result = compile_world(args.source, args.out, describe=args.describe, model=model, repairs=args.repairs,
                               stop_after=args.stop_after, progress=progress, live=live, runtime=args.runtime)
    except CompileError as exc:
        print(f"rehearsal: error: {exc}", file=sys.stderr)
        return 2
    summary = result.summary
    if args.json:
        print(json.dumps({**summary, "folder": str(result.folder), "seconds": result.seconds}, indent=2))
    elif summary:
        print(f"compiled {result.folder}: {summary['jobs']} jobs validated over {len(summary['kinds_of_write'])} "
              f"kinds of write ({', '.join(summary['kinds_of_write'])}); {summary['kept_out']} kept out; splits "
              f"{summary['splits']}; world version {summary['world_version']}; page {result.folder / 'COMPILE.md'}")
    else:
        print(f"stopped after {args.stop_after}: {result.folder.parent / '.compile'}")
    if result.live and not args.json:
        print(f"live attempts by {live[0].ref if live else '?'}: {summary_line(result.live)} "
              "(on the page; the gate alone keeps jobs out)")
    if args.publish and summary:
        return _publish(result.folder, args.versions)
    return 0


def _publish(folder: object, versions: str | None) -> int:
    """Publish the compiled world with the existing build (validation again, on the sandbox, and the facts)."""
    from ..compiler import docker_available
    from ..versions import build_and_publish
    from ..worlds import load_world_folder

    if not docker_available():
        print("rehearsal: error: publish: expected a Docker daemon (the world's http tools run on the sandbox); none "
              f"answers. Fix: start one and run `rehearsal world build {folder}`, or compile without --publish",
              file=sys.stderr)
        return 2
    built = build_and_publish(load_world_folder(str(folder)), versions)
    version = built.version
    print(f"published {version.id} at {built.path}: {len(version.scenarios)} jobs in the version, "
          f"{len(version.kept_out)} kept out by the sandbox build ({built.seconds:.1f}s)")
    return 0

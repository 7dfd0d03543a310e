"""World versions: the ``wv_`` content id, scenario validation, manifests, withdrawals, world pages.

``world_version(world)`` names a world's content; ``build_and_publish`` validates
every scenario (:mod:`._validate`), measures the reset and isolation facts
(:mod:`._isolation`) and writes the immutable version (:mod:`._store`);
``recheck`` replays a published version and withdraws scenarios found unfair;
``scenarios_not_in_use`` tells the runner what to leave out; ``render_html`` /
``render_markdown`` make the world page.
"""

from ..identity import content_hashes, version_id_of, world_content, world_version
from ._build import BuildResult, RecheckResult, build_and_publish, build_version, recheck, withdraw_by_hand
from ._crashes import CRASH_FILE, note_tool_crashes, tool_crash_counts
from ._live import (
    LIVE_FILE,
    LiveAttempt,
    attempt,
    attempt_all,
    attempt_version,
    describe_attempt,
    latest_by_scenario,
    load_attempts,
    missing_facts,
    reference_keys,
    save_attempts,
)
from ._manifest import (
    CHECK_LABELS,
    VALIDATOR_VERSION,
    Fact,
    Finding,
    Manifest,
    ScenarioValidation,
    Withdrawal,
    WorldVersion,
)
from ._page import render_html, render_markdown, summary_line
from ._play import BuildAborted
from ._store import (
    NotPublished,
    VersionConflict,
    load_content,
    load_manifest,
    publish,
    scenarios_not_in_use,
    version_dir,
    versions_root,
    withdraw,
)
from ._validate import validate_scenario

__all__ = [
    "CRASH_FILE",
    "CHECK_LABELS",
    "LIVE_FILE",
    "VALIDATOR_VERSION",
    "BuildAborted",
    "BuildResult",
    "Fact",
    "Finding",
    "LiveAttempt",
    "Manifest",
    "NotPublished",
    "RecheckResult",
    "ScenarioValidation",
    "VersionConflict",
    "Withdrawal",
    "WorldVersion",
    "attempt",
    "attempt_all",
    "attempt_version",
    "build_and_publish",
    "describe_attempt",
    "build_version",
    "content_hashes",
    "load_attempts",
    "save_attempts",
    "latest_by_scenario",
    "load_content",
    "load_manifest",
    "note_tool_crashes",
    "missing_facts",
    "publish",
    "recheck",
    "reference_keys",
    "render_html",
    "render_markdown",
    "scenarios_not_in_use",
    "summary_line",
    "tool_crash_counts",
    "validate_scenario",
    "version_dir",
    "version_id_of",
    "versions_root",
    "withdraw",
    "withdraw_by_hand",
    "world_content",
    "world_version",
]

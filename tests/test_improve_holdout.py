"""Holdout is an identity, not a label (issue 35): a scenario any published version placed in holdout stays holdout.

The tiny world's version 1 places ``pay-unknown`` in holdout. Later versions (and a world rebuilt from the same
application under another name) move it into a learnable split: by label, copied under another id, reworded. The
improvement step refuses each run on them with one line naming the holdout scenario it is; readiness never counts
as "never learned from" a holdout scenario an improvement read under another id. And every improve input that
cannot be used is one error line (a version with an empty split included).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import tinyworld
from published import publish_content

from rehearsal_env.agents import AgentProfile, ProfileStore, ScriptedAgent
from rehearsal_env.cli import main
from rehearsal_env.improve import HoldoutRefused, Lineage, improve, write_lineage
from rehearsal_env.readiness import assess_runs
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.scenarios import Scenario, Solution, ToolCall
from rehearsal_env.worlds import World, register_world

GIVE_UP = Solution("give-up", (ToolCall("give_up", {"reason": "I cannot do this"}),))


def variant(change: Callable[[list[Scenario]], list[Scenario]], name: str = "tiny") -> World:
    """The tiny world with its scenarios changed (another version of it, or a world rebuilt under ``name``)."""
    base = tinyworld.build_world()

    def scenarios(world: World) -> list[Scenario]:
        return [replace(s, world=world.name) for s in change(list(base.generate_scenarios(world)))]

    return replace(base, name=name, generate_scenarios=scenarios)


def _holdout(scenarios: list[Scenario]) -> Scenario:
    return next(s for s in scenarios if s.id == "pay-unknown")


VARIANTS: dict[str, Callable[[], World]] = {
    "moved into dev": lambda: variant(lambda ss: [replace(s, split="dev") if s.id == "pay-unknown" else s
                                                  for s in ss]),
    "copied under another id": lambda: variant(lambda ss: [*ss, replace(_holdout(ss), id="pay-later", split="dev")]),
    "reworded under another id": lambda: variant(lambda ss: [*[s for s in ss if s.id != "pay-unknown"], replace(
        _holdout(ss), id="payout-five", split="train", request="Please send five dollars from account number 1!")]),
    "in a world rebuilt from the same folder": lambda: variant(
        lambda ss: [replace(s, split="dev") if s.id == "pay-unknown" else s for s in ss], name="tinier"),
}


@pytest.fixture()
def home(tmp_path: Path) -> Iterator[Path]:
    """Version 1 of the tiny world published, and a profile ``bot`` (v1) to improve; the registry restored after."""
    root = tmp_path / "versions"
    publish_content(tinyworld.build_world(), root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REHEARSAL_WORLD_VERSIONS", str(root))
        mp.setenv("REHEARSAL_AGENT_PROFILES", str(tmp_path / "profiles"))
        ProfileStore(tmp_path / "profiles").register(AgentProfile(name="bot", agent="openai", model="m",
                                                                  instructions="Be careful."))
        register_world("tiny", tinyworld.build_world)
        yield root
        register_world("tiny", tinyworld.build_world)


def played(world: World, out: Path, version: str = "v1", solution: Solution = GIVE_UP,
           scenarios: tuple[str, ...] | None = None, repeats: int = 1) -> Path:
    """``world`` (registered under its name) played by ``bot`` ``version``: sealed records, as a run writes them."""
    register_world(world.name, lambda: world)
    run(RunConfig(world=world.name, agent="bot", agent_version=version, scenarios=scenarios or (), repeats=repeats),
        out, agent_factory=lambda s: ScriptedAgent(solution), progress=False)
    return out


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("how", list(VARIANTS))
def test_improve_refuses_a_holdout_scenario_whatever_split_a_later_version_gives_it(home: Path, tmp_path: Path,
                                                                                   how: str) -> None:
    world = VARIANTS[how]()
    publish_content(world, home)
    learnable = tuple(s.id for s in world.scenarios() if s.split != "holdout")
    run_dir = played(world, tmp_path / "run", scenarios=learnable)
    with pytest.raises(HoldoutRefused, match=r"is holdout as tiny wv_\w+ pay-unknown \(holdout\), the same "):
        improve([run_dir], "bot", store=ProfileStore(tmp_path / "profiles"))
    code, out, err = cli("improve", str(run_dir), "--agent-profile", "bot")
    assert code == 2 and out == "" and err.count("\n") == 1 and "stays holdout" in err
    assert ProfileStore(tmp_path / "profiles").get("bot").version == 1  # nothing written


def test_the_same_runs_without_the_holdout_scenario_improve(home: Path, tmp_path: Path) -> None:
    world = VARIANTS["copied under another id"]()
    publish_content(world, home)
    run_dir = played(world, tmp_path / "run", scenarios=("pay-ann", "pay-changed"))
    result = improve([run_dir], "bot", store=ProfileStore(tmp_path / "profiles"))
    assert result.profile is not None and result.lineage is not None
    assert {key.split("/")[1].split("#")[0] for key in result.lineage.episodes} == {"pay-ann", "pay-changed"}


def test_readiness_never_counts_a_holdout_scenario_an_improvement_read_under_another_id(home: Path,
                                                                                       tmp_path: Path) -> None:
    """A lineage written before holdout was an identity names ``pay-later``, version 2's copy of holdout
    ``pay-unknown``: readiness of the improved version on version 1 does not count ``pay-unknown``."""
    world = VARIANTS["copied under another id"]()
    publish_content(world, home)
    store = ProfileStore(tmp_path / "profiles")
    v2, _ = store.register(replace(store.get("bot"), instructions="Be careful. Pay out once.", version=None))
    assert v2.version == 2
    write_lineage(Lineage(profile="bot", version=2, parent_version=1, runs=("run_x",),
                          episodes=("run_x/pay-later#0",), splits=("train", "dev"), writer="rules",
                          lessons=("Pay out once.",)), tmp_path / "profiles")
    register_world("tiny", tinyworld.build_world)
    reference = tinyworld.build_world().scenario("pay-unknown").reference
    run_dir = played(tinyworld.build_world(), tmp_path / "holdout", version="v2", solution=reference,
                     scenarios=("pay-unknown",), repeats=3)
    (verdict,) = assess_runs([run_dir], versions_root=home)
    assert verdict.improved and verdict.counted == 0 and not verdict.ready
    assert dict(verdict.left_out) == {"learned from (the same scenario as one its improvement read)": 3}
    plain = tmp_path / "profiles-none"
    (fresh,) = assess_runs([run_dir], versions_root=home, profiles_root=plain)  # no lineage: all three count
    assert fresh.counted == 3


def test_a_version_with_an_empty_split_is_one_line_not_a_traceback(home: Path, tmp_path: Path) -> None:
    world = variant(lambda ss: [s for s in ss if s.split != "train"])  # no train scenario at all
    publish_content(world, home)
    run_dir = played(world, tmp_path / "run", scenarios=("pay-ann",))
    result = improve([run_dir], "bot", store=ProfileStore(tmp_path / "profiles"))
    assert result.profile is not None  # dev alone is read
    code, out, err = cli("improve", str(run_dir), "--agent-profile", "bot@v1")
    assert code == 0 and err == "" and out.count("\n") == 1  # "the improved profile equals bot@v2 ..."


@pytest.mark.parametrize("case", ["missing", "empty", "file", "unknown profile", "no episode of it", "built-in",
                                  "no --agent-profile", "not published"])
def test_every_unusable_improve_input_is_one_error_line(home: Path, tmp_path: Path, case: str) -> None:
    store = tmp_path / "profiles"
    ProfileStore(store).register(AgentProfile(name="ref", agent="reference"))
    good = played(tinyworld.build_world(), tmp_path / "good", scenarios=("pay-ann",))
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("not a run")
    args = {"missing": [str(tmp_path / "nope"), "--agent-profile", "bot"],
            "empty": [str(tmp_path / "empty"), "--agent-profile", "bot"],
            "file": [str(tmp_path / "file"), "--agent-profile", "bot"],
            "unknown profile": [str(good), "--agent-profile", "nobody"],
            "no episode of it": [str(played(tinyworld.build_world(), tmp_path / "other", version="v9",
                                            scenarios=("pay-ann",))), "--agent-profile", "bot"],
            "built-in": [str(good), "--agent-profile", "ref"],
            "no --agent-profile": [str(good)],
            "not published": [str(played(variant(lambda ss: ss[:2], name="unpublished"), tmp_path / "u",
                                         scenarios=("pay-ann",))), "--agent-profile", "bot"]}[case]
    code, out, err = cli("improve", *args)
    assert code == 2 and out == "", (case, out, err)
    assert err.startswith("rehearsal: error: ") and err.count("\n") == 1, (case, err)
    assert "Traceback" not in err and len(err) < 700, (case, err)

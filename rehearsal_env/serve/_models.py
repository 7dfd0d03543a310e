"""The API's request and response bodies (pydantic), each field described for the OpenAPI docs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..env import MAX_ACTION


class AgentInfo(BaseModel):
    """Who plays: the agent's name and version, stamped on the episode's record."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field("external", min_length=1, max_length=200, description="The agent's name (records' `agent`).")
    version: str = Field("unversioned", min_length=1, max_length=200,
                         description="The agent profile's version (records' `agent_version`; readiness is "
                                     "per version).")


class CreateEpisode(BaseModel):
    """Start an episode of one scenario."""

    model_config = ConfigDict(extra="forbid")
    world: str = Field(..., description="World name (see `GET /v1/worlds`).", examples=["shop"])
    scenario: str = Field(..., description="Scenario id of the world.", examples=["refund-item-0001"])
    seed: int = Field(0, ge=0, le=2**63 - 1, description="Reset seed (the records' `seed`).")
    profile: str | None = Field(None, description="Reward profile (`benchmark`, `rl`); null: the outcome reward.")
    agent: AgentInfo = Field(AgentInfo(name="external", version="unversioned"), description="The agent that plays.")
    request_id: str | None = Field(
        None, max_length=200,
        description="Makes this request idempotent: a retry with the same id returns the same episode "
                    "instead of starting a second one.")


class Step(BaseModel):
    """One action of the agent."""

    model_config = ConfigDict(extra="forbid")
    action: str = Field(..., max_length=MAX_ACTION,  # the action space's own bound (env.MAX_ACTION)
                        description='The action: JSON text `{"tool": NAME, "args": {...}}`, optionally with '
                                    '`"usage": {"tokens": N}` (report tokens, or efficiency stays unmeasured).')
    step_index: int = Field(..., ge=0,
                            description="0 for the first step, then 1, 2, ...: a retry with the same index "
                                        "returns the same response and is never applied twice; any other "
                                        "index is refused with 409 and the expected one.")


class Space(BaseModel):
    """A `gymnasium.spaces.Text` space."""

    max_length: int = Field(..., description="Longest text.")
    charset: str = Field(..., description="Every character the text may hold.")


class EpisodeStarted(BaseModel):
    """A new episode: its id and the first observation."""

    episode_id: str = Field(..., description="The session's id; never reused.")
    observation: str = Field(..., description="The first observation (JSON text): the customer's request.")
    tools: list[dict[str, Any]] = Field(..., description="The role's tools in OpenAI function-calling format.")
    policies: list[str] = Field(..., description="The rules the agent must follow, in plain words.")
    turn: int = Field(..., description="Turns taken so far (0).")
    step_index: int = Field(..., description="The index the next step must carry (0).")
    world: str = Field(..., description="The world.")
    scenario: str = Field(..., description="The scenario.")
    split: str = Field(..., description="train / dev / holdout.")
    role: str = Field(..., description="The agent's role.")
    observation_space: Space = Field(..., description="Where observations live.")
    action_space: Space = Field(..., description="Where actions live.")
    caveats: list[str] = Field(..., description="What keeps this episode's reward from comparing with others "
                                                "(the external-mode caveat while no tokens are reported).")


class StepResult(BaseModel):
    """What one step did."""

    observation: str = Field(..., description="The observation (JSON text).")
    reward: float = Field(..., description="0 until the last step, then the final reward (outcome reward or "
                                           "the profile's; 0 for a not-scored episode).")
    terminated: bool = Field(..., description="The episode ended (`finish`, `give_up`, or the environment failed).")
    truncated: bool = Field(..., description="The turn limit ended the episode.")
    status: str = Field(..., description="The tool result's status: ok, error, unknown or rejected.")
    turn: int = Field(..., description="Turns taken so far.")
    step_index: int = Field(..., description="The index the next step must carry.")
    verdict: dict[str, Any] | None = Field(
        None, description="On the last step: outcome, ending, outcome_reward, reward, reason, metrics; the "
                          "check results only for a build-and-evaluate key and never for a holdout scenario.")
    reward_detail: dict[str, Any] | None = Field(
        None, description="Under a profile, on the last step: components, gates that zeroed it, caveats.")
    caveats: list[str] = Field(..., description="The external-mode caveat while the agent reports no tokens.")


class EpisodeState(BaseModel):
    """An episode as it stands."""

    episode_id: str = Field(..., description="The session's id.")
    state: str = Field(..., description="active, or ended (then the verdict is set).")
    world: str = Field(..., description="The world.")
    scenario: str = Field(..., description="The scenario.")
    split: str = Field(..., description="train / dev / holdout.")
    agent: AgentInfo = Field(..., description="Who plays.")
    seed: int = Field(..., description="Reset seed.")
    profile: str | None = Field(..., description="Reward profile, or null for the outcome reward.")
    turn: int = Field(..., description="Turns taken so far.")
    step_index: int = Field(..., description="The index the next step must carry.")
    ended_by: str | None = Field(None, description="What ended it: the agent (`agent`), `delete`, `idle_timeout`, "
                                                   "`server_shutdown`; null while active.")
    verdict: dict[str, Any] | None = Field(None, description="The verdict once ended (scoped as in a step).")
    run_dir: str | None = Field(None, description="The run directory its record is written to (null: not recorded).")
    caveats: list[str] = Field(..., description="The external-mode caveat while the agent reports no tokens.")


class ScenarioInfo(BaseModel):
    """A scenario as any key may see it."""

    id: str = Field(..., description="Scenario id.")
    split: str = Field(..., description="train / dev / holdout.")
    role: str = Field(..., description="The agent's role.")
    category: str = Field(..., description="The scenario's category.")
    request: str = Field(..., description="The customer's opening request.")
    turn_limit: int = Field(..., description="Most turns an episode may take.")


class ScenarioChecks(BaseModel):
    """A scenario's checks and solutions (build-and-evaluate keys; never a holdout scenario)."""

    id: str = Field(..., description="Scenario id.")
    split: str = Field(..., description="train or dev.")
    goal_checks: list[dict[str, Any]] = Field(..., description="Goal checks: name, sql, params, op, want.")
    hard_rules: list[dict[str, Any]] = Field(..., description="Hard rules: name, sql, params, op, want.")
    reference: dict[str, Any] = Field(..., description="The reference solution: its tool calls.")
    wrong: list[dict[str, Any]] = Field(..., description="The named wrong solutions.")


class WorldInfo(BaseModel):
    """A world this server serves."""

    name: str = Field(..., description="World name.")
    description: str = Field(..., description="What the world is.")
    data_anchor: str = Field(..., description="The frozen day the data is dated for.")
    scenarios: dict[str, int] = Field(..., description="Scenarios per split.")


class ApiError(BaseModel):
    """Every error: what was expected, what arrived, how to fix it."""

    detail: str = Field(..., description="The error in words.")
    expected_step_index: int | None = Field(None, description="On 409: the index the next step must carry.")

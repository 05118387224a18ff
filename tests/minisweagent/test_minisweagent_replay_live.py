"""``flexamem replay`` sends what the live wrapper sent (issue 9, defect 6).

Replay without a memory passed in must build the memory the way :class:`FlexAMemModel`
does (``pin_user_turn`` off: a mini-swe-agent user message after the task is an
observation or a format error, never a new human turn).
"""

from __future__ import annotations

import json

from flexamem_minisweagent import FlexAMemModel
from flexamem_minisweagent.replay import replay_steps
from flexamem_minisweagent.trajectory import model_calls
from mswea_checks import plain
from mswea_fakes import RecordingDeterministicToolcallModel
from test_minisweagent_replay import v2_toolcall_trajectory

BUDGET = 1500


def test_replay_sends_what_the_live_wrapper_sends() -> None:
    trajectory = v2_toolcall_trajectory(steps=10)  # a format error (a user message) after step 4
    messages = trajectory["messages"]
    steps = replay_steps(trajectory, BUDGET, tool_tokens=0)
    live = FlexAMemModel(inner=RecordingDeterministicToolcallModel(outputs=[]), flexamem={"budget": BUDGET,
                                                                                        "tool_schema_tokens": 0})
    calls = model_calls(messages)
    assert len(steps) == len(calls)
    rendered = 0
    for step, index in zip(steps, calls):
        host, _ = live.render(messages[:index])
        assert step["sent"] == [plain(m) for m in json.loads(json.dumps(list(host)))]
        rendered += not step["passthrough"]
    assert rendered >= 3
    # The format error left the window in later calls, and was not pinned back in.
    late = steps[-1]["sent"]
    assert not any(m["role"] == "user" and m["content"].startswith("Tool call error") for m in late)

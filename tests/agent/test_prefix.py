"""Requests built by the executor from a real working memory share their stable prefix step to
step: nothing that changes every step sits before the end of the working memory."""

from __future__ import annotations

from agent_cli.agent.attempt.executor import Exchange, build_messages
from agent_cli.agent.attempt.runtime import Limits, Runtime
from agent_cli.agent.run.state import AgentState
from agent_cli.core import fences, tokens
from agent_cli.core.models import Task, ToolCall
from agent_cli.llm.server.info import fit_window
from agent_cli.memory import WorkingMemory
from fencekit import pointed_result

KINDS = ["file", "tool_output", "edit", "test_result", "log"]


def runtime(memory: WorkingMemory) -> Runtime:
    state = AgentState(
        goal="make the scheduler retry failed jobs",
        plan=[Task(goal="add retry()", acceptance_cmd="python -m pytest -q")],
    )
    state.plan[0].status = "running"
    return Runtime(
        model=None,
        toolbox=None,
        memory=memory,
        state=state,
        limits=Limits(
            max_steps=200, task_max_steps=30, budget_usd=5.0, tool_output_max_tokens=3000
        ),
        emit=lambda event: None,
        log=lambda record: None,
        save=lambda: None,
        recalled=fences.retrieved_memory("an earlier run added backoff()"),
    )


def result(i: int) -> str:
    words = " ".join(f"w{i}x{j}" for j in range(20 + (i * 7) % 90))
    return fences.tool_output("run", f"$ step {i}\n{words}")


def step(rt: Runtime, i: int) -> list[dict]:
    """One tool call: its result into memory, the counters on, the next request built."""
    call = ToolCall(id=f"call_{i}", name="run", arguments='{"cmd": "step"}')
    if i % 17 == 5:
        rt.memory.note(f"note {i}: keep the signature of retry()")
    item = rt.memory.add(KINDS[i % len(KINDS)], result(i))
    rt.memory.tick()
    rt.state.step += 1
    return build_messages(
        rt, 0, 1, 30 - i % 30, Exchange(calls=[call], results=[result(i)], items=[item])
    )


def memory_at(messages: list[dict]) -> int:
    return next(
        at
        for at, m in enumerate(messages)
        if str(m.get("content") or "").startswith("WORKING MEMORY:")
    )


def test_between_batches_a_request_extends_the_last_one_past_its_working_memory():
    mem = WorkingMemory(max_tokens=6000)
    rt = runtime(mem)
    previous, extended, batches = step(rt, 0), 0, 0
    for i in range(1, 90):
        evictions = mem.stats()["evictions"]
        messages = step(rt, i)  # every 17th step takes a note too
        at, before = memory_at(messages), memory_at(previous)
        assert messages[:at] == previous[:before]  # system, recalled memory, pinned notes
        if mem.stats()["evictions"] == evictions:  # the block grew after the cold list too
            assert messages[at]["content"].startswith(previous[before]["content"])
            extended += 1
        batches += mem.stats()["evictions"] != evictions
        assert "Tool calls left" not in "".join(str(m.get("content")) for m in messages[: at + 1])
        previous = messages
    assert extended > 50 and batches > 3


def test_a_note_waits_in_the_memory_block_until_the_next_attempt_lays_memory_out():
    mem = WorkingMemory(max_tokens=2500)
    rt = runtime(mem)
    messages = step(rt, 5)  # a step that takes a note
    at = memory_at(messages)
    assert not messages[at - 1]["content"].startswith("PINNED NOTES:")
    assert "[note m1 pinned] note 5" in messages[at]["content"]
    mem.lay_out()  # what run_attempt() does first
    messages = step(rt, 6)
    at = memory_at(messages)
    assert messages[at - 1]["content"].startswith("PINNED NOTES:\n[note m1 pinned]")
    assert "[note" not in messages[at]["content"]


def test_a_result_the_memory_block_holds_is_sent_once():
    mem = WorkingMemory(max_tokens=6000)
    rt = runtime(mem)
    step(rt, 0)
    messages = step(rt, 1)
    memory, tool = messages[memory_at(messages)]["content"], messages[-2]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert tool["content"] == "(in WORKING MEMORY: [tool_output m2])"
    assert result(1) in memory and result(1) not in tool["content"]


def test_a_repeated_result_keeps_the_memory_block_and_its_pointer_says_how_many_times():
    mem = WorkingMemory(max_tokens=6000)
    rt = runtime(mem)
    for i in range(4):
        step(rt, i)
    before = step(rt, 4)
    call = ToolCall(id="call_again", name="run", arguments='{"cmd": "step"}')
    again = rt.memory.add(KINDS[1], result(1))  # the result of step 1, word for word
    rt.memory.tick()
    after = build_messages(rt, 0, 1, 20, Exchange(calls=[call], results=[result(1)], items=[again]))
    at = memory_at(after)
    assert again == "m2" and after[: at + 1] == before[: at + 1]  # the whole block is cached
    assert after[-2]["content"] == (
        "(in WORKING MEMORY: [tool_output m2], the same result 2 times now)"
    )
    assert pointed_result(after[-2]["content"], after[at]["content"]) == result(1)


def test_a_window_too_small_for_memory_leaves_its_weakest_items_out_never_the_latest_edit():
    """The memory block is assembled again within what the window leaves, whole items left out
    (its text is not cut from its end, where the newest items are), and no result is lost: the
    newest is in the block, or comes back in full in its tool message."""
    mem = WorkingMemory(max_tokens=6000)
    rt = runtime(mem)
    for i in range(40):
        step(rt, i)
    edit = mem.add("edit", "def retry(job):\n    return backoff(job)\n", "edited sched.py")
    roomy = step(rt, 40)
    full = roomy[memory_at(roomy)]["content"]
    rt.limits.context_window, rt.limits.reserved_output_tokens = 4000, 500  # memory must shrink
    messages = step(rt, 41)
    memory = messages[memory_at(messages)]["content"]
    assert "cut to fit" not in memory and len(memory) < len(full) * 0.8
    assert f"[edit {edit}]" in memory and "return backoff(job)" in memory
    newest = messages[-2]
    assert newest["role"] == "tool"
    assert result(41) in memory or newest["content"] == result(41)


def test_the_last_message_holds_only_what_changes_from_step_to_step():
    mem = WorkingMemory(max_tokens=6000)
    rt = runtime(mem)
    rt.state.plan += [Task(goal=f"task {n}: " + "word " * 40) for n in range(2, 9)]
    rt.state.facts = [f"fact {n}: " + "word " * 30 for n in range(5)]
    rt.state.last_error = "`pytest` exited 1\n" + "E   assert 1 == 2\n" * 20
    first, second = step(rt, 1), step(rt, 2)
    brief = [m["content"] for m in first if str(m["content"]).startswith("CURRENT TASK (1 of 8)")]
    assert len(brief) == 1 and first.index(next(m for m in first if m["content"] == brief[0])) < (
        memory_at(first)
    )
    for part in ("Acceptance command", "PLAN (", "VERIFIED FACTS", "LAST FAILURE", "assert 1 == 2"):
        assert part in brief[0] and part not in first[-1]["content"]
    tail = second[-1]["content"]
    assert tail.startswith("NOW: task 1 of 8, attempt 1 of 2: add retry()")
    assert "Tool calls left in this attempt: 28" in tail and len(tail) < 300


def test_in_a_small_window_a_step_with_a_full_memory_and_the_largest_result_fits_as_it_is():
    """At the sizes `fit_window` gives a 4,096-token window, a step whose working memory is full
    and whose result, sent whole, is at the tool-output cap fits without the memory block being
    assembled smaller: both are counted as JSON, where quotes and newlines cost more."""
    memory, tool_output, reply = fit_window(4096, 8000, 3000, 4096)
    mem = WorkingMemory(max_tokens=memory)
    rt = runtime(mem)
    rt.limits.context_window, rt.limits.reserved_output_tokens = 4096, reply
    rt.limits.tool_output_max_tokens = tool_output
    rt.state.plan += [Task(goal=f"task {n}: " + "word " * 30) for n in range(2, 5)]
    for i in range(30):
        step(rt, i)
    for n in range(8):  # the latest edits, which no batch takes: the memory stays full
        diff = "".join(f'-    old_{n}_{k} = "a"\n+    new_{n}_{k} = "b"\n' for k in range(6))
        mem.add("edit", diff, f"edited mod{n}.py")
        mem.tick()
    assert mem.assemble().tokens > memory * 85 // 100
    code = "".join(f'    value_{n} = table["key_{n}"].get("x", {n})\n' for n in range(200))
    output = fences.tool_output("read_file", tokens.truncate(code, tool_output - 30))
    item = mem.add("file", output, "read big.py")
    mem.tick()
    call = ToolCall(id="call_big", name="read_file", arguments='{"path": "big.py"}')
    messages = build_messages(rt, 0, 1, 10, Exchange(calls=[call], results=[output], items=[item]))
    assert messages[-2]["content"] == output  # too large for the memory: sent whole
    assert messages[memory_at(messages)]["content"] == "WORKING MEMORY:\n" + mem.assemble().memory

"""Record writers: rule records keep the trace useful; the LLM writer validates and falls back."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from flexamem_core import LLMRecordWriter, Message, RuleRecordWriter, ToolCall
from flexamem_core.model.schema import Unit
from flexamem_core.write.units import pack_units, to_unit
from flexamem_core.write.writers import cut_words

from .strategies import agent_history, conversation


def make_unit(messages: list[Message], tokenizer, kind: str = "agent", first_step: int = 1) -> Unit:
    packed = pack_units(messages, kind, tokenizer, 10**9, first_step=first_step, final=True)
    assert len(packed) == 1
    return to_unit(packed[0], kind, None)


def n_words(text: str) -> int:
    return len(text.split())


def test_text_action_record_keeps_command_exit_code_and_error(tokenizer):
    unit = make_unit([
        Message(role="assistant", content="THOUGHT: run the parser tests\n```bash\npython -m pytest tests/test_dates.py"
                                          " -x\n```"),
        Message(role="user", content="<returncode>1</returncode>\n<output>\ncollected 12 items\n"
                                     "tests/test_dates.py F\nTraceback (most recent call last):\n"
                                     "  File \"src/dates.py\", line 88, in parse_date\n"
                                     "ValueError: month must be in 1..12, got 13\n"
                                     "1 failed, 11 passed in 0.42s\n</output>"),
    ], tokenizer, first_step=4)
    record = RuleRecordWriter().write(unit).record
    assert "step 4" in record
    assert "python -m pytest tests/test_dates.py -x" in record
    assert "rc 1" in record
    assert "ValueError: month must be in 1..12, got 13" in record
    assert "1 failed, 11 passed" in record
    assert n_words(record) <= 80


def test_tool_call_record_keeps_arguments_and_key_values(tokenizer):
    unit = make_unit([
        Message(role="assistant", content="", tool_calls=(
            ToolCall("query_db", json.dumps({"table": "invoices", "customer_id": 90817}), "c1"),
            ToolCall("read_file", json.dumps({"path": "config/settings.yaml"}), "c2"))),
        Message(role="tool", content="rows: 3\ntotal_due = 4,512.75 EUR\nnext_due_date 2024-07-31",
                tool_call_id="c1"),
        Message(role="tool", content="exit code: 2\ncat: config/settings.yaml: No such file or directory",
                tool_call_id="c2"),
    ], tokenizer)
    written = RuleRecordWriter().write(unit)
    record = written.record
    assert "query_db(" in record and "table=invoices" in record and "customer_id=90817" in record
    assert "read_file(path=config/settings.yaml)" in record
    assert "rows: 3" in record  # the first value printed when there is no error
    assert "rc 2" in record and "No such file or directory" in record
    assert written.tags[:2] == ("query_db", "read_file")
    assert written.writer == "rule" and written.llm_calls == 0


def test_long_tool_arguments_are_abbreviated_but_kept(tokenizer):
    unit = make_unit([
        Message(role="assistant", tool_calls=(ToolCall("write_file", json.dumps(
            {"path": "a.py", "content": "x = 1\n" * 200}), "c1"),)),
        Message(role="tool", content="ok", tool_call_id="c1"),
    ], tokenizer)
    record = RuleRecordWriter().write(unit).record
    assert "path=a.py" in record and "..." in record
    assert n_words(record) <= 80


def test_conversation_record_keeps_names_dates_and_numbers(tokenizer):
    meta = {"session": "3", "date": "2023-05-08"}
    unit = make_unit([
        Message(role="user", content="hey, how was your weekend? the weather was nice.", name="Caroline",
                metadata=meta),
        Message(role="assistant", content="It was okay. Actually I adopted a dog named Biscuit on "
                                          "Saturday, and she is 3 years old! I am so happy.", name="Melanie",
                metadata=meta),
        Message(role="user", content="Wow. I am going to Lisbon on 14 June for 5 days with Tom.",
                name="Caroline", metadata=meta),
    ] + [Message(role="assistant", content="filler chat without much in it. " * 8, name="Melanie",
                 metadata=meta)] * 6, tokenizer, kind="reader")
    record = RuleRecordWriter().write(unit).record
    assert record.startswith("[2023-05-08]")
    for kept in ("Melanie", "Biscuit", "3 years", "Caroline", "Lisbon", "14 June", "Tom"):
        assert kept in record
    assert n_words(record) <= 80


@settings(deadline=None, max_examples=40, suppress_health_check=list(HealthCheck))
@given(history=conversation(min_turns=1, max_turns=40))
def test_conversation_records_stay_within_80_words(history, tokenizer):
    msgs = [Message.from_dict(m) for m in history]
    for p in pack_units(msgs, "reader", tokenizer, 2000, final=True):
        written = RuleRecordWriter().write(to_unit(p, "reader", None))
        assert 0 < n_words(written.record) <= 81  # 80 words plus the "..." cut mark
        assert len(written.keywords) <= 10


@settings(deadline=None, max_examples=40, suppress_health_check=list(HealthCheck))
@given(history=agent_history(min_steps=1, max_steps=20))
def test_agent_records_stay_within_80_words(history, tokenizer):
    msgs = [Message.from_dict(m) for m in history]
    for p in pack_units(msgs, "agent", tokenizer, 1000, final=True):
        record = RuleRecordWriter().write(to_unit(p, "agent", None)).record
        assert 0 < n_words(record) <= 81


def test_rule_merge_is_cut_to_the_merged_limit():
    text, calls = RuleRecordWriter().merge(["word " * 80] * 4)
    assert calls == 0 and n_words(text) <= 121
    text, _ = RuleRecordWriter().merge(["step 1 ran `ls`", "step 2 ran `cat a.py`"])
    assert "step 1 ran `ls`" in text and "step 2 ran `cat a.py`" in text


# ---------------------------------------------------------------------------- LLM writer

@pytest.fixture
def step_unit(tokenizer) -> Unit:
    return make_unit([
        Message(role="assistant", content="```bash\ngrep -rn parse_date src/\n```"),
        Message(role="user", content="<returncode>0</returncode>\nsrc/dates.py:88:def parse_date(s):"),
    ], tokenizer)


class Chat:
    """A plain chat function that records its prompts and returns a fixed reply."""

    def __init__(self, reply=None, error: Exception | None = None) -> None:
        self.reply = reply
        self.error = error
        self.prompts: list[list[dict]] = []

    def __call__(self, messages: list[dict]) -> str:
        self.prompts.append(messages)
        if self.error is not None:
            raise self.error
        return self.reply


def test_llm_writer_uses_valid_json(step_unit):
    chat = Chat("Here you go:\n" + json.dumps({
        "record": "Searched src/ for parse_date; found it at src/dates.py line 88.",
        "keywords": ["parse_date", "src/dates.py", " "], "tags": ["grep"],
        "description": "find the parser"}))
    written = LLMRecordWriter(chat).write(step_unit)
    assert written.record == "Searched src/ for parse_date; found it at src/dates.py line 88."
    assert written.keywords == ("parse_date", "src/dates.py")
    assert written.tags == ("grep",) and written.description == "find the parser"
    assert written.writer == "llm" and written.llm_calls == 1
    prompt = chat.prompts[0][0]["content"]
    assert "grep -rn parse_date src/" in prompt and "80 words" in prompt


def test_llm_writer_cuts_an_over_long_record(step_unit):
    chat = Chat(json.dumps({"record": "word " * 300, "keywords": [f"k{i}" for i in range(50)],
                            "tags": [f"t{i}" for i in range(50)], "description": "d " * 100}))
    written = LLMRecordWriter(chat, record_words=80).write(step_unit)
    assert written.writer == "llm"
    assert n_words(written.record) <= 81
    assert len(written.keywords) <= 12 and len(written.tags) <= 8
    assert n_words(written.description) <= 26


@pytest.mark.parametrize("reply", [
    "not json at all",
    "{\"record\": ",
    json.dumps({"keywords": ["x"]}),
    json.dumps({"record": "   "}),
    json.dumps(["record", "list"]),
    None,
])
def test_llm_writer_falls_back_on_bad_output(reply, step_unit):
    written = LLMRecordWriter(Chat(reply)).write(step_unit)
    expected = RuleRecordWriter().write(step_unit)
    assert written.writer == "rule-fallback" and written.llm_calls == 1
    assert written.record == expected.record and written.keywords == expected.keywords


def test_llm_writer_falls_back_when_the_model_raises(step_unit):
    written = LLMRecordWriter(Chat(error=TimeoutError("model down"))).write(step_unit)
    assert written.writer == "rule-fallback"
    assert "grep -rn parse_date src/" in written.record


def test_llm_merge_is_cut_at_150_words_and_falls_back():
    texts = ["step 1 ran `ls`", "step 2 ran `cat a.py`"]
    merged, calls = LLMRecordWriter(Chat("merged " * 400)).merge(texts)
    assert calls == 1 and n_words(merged) <= 151
    good, _ = LLMRecordWriter(Chat("Listed files, then read a.py.")).merge(texts)
    assert good == "Listed files, then read a.py."
    for bad in (Chat(""), Chat(error=RuntimeError("boom"))):
        merged, calls = LLMRecordWriter(bad).merge(texts)
        assert calls == 1
        assert merged == RuleRecordWriter().merge(texts)[0]


def test_cut_words_marks_the_cut():
    assert cut_words("a b c", 5) == "a b c"
    assert cut_words("a b c d", 2) == "a b ..."

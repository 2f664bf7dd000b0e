"""Names an item defines and mentions; the ranking of symbol hits."""

from __future__ import annotations

from agent_cli.memory.symbols import definitions, identifiers, rank_hits

MODULE = '''"""Docs that say def not_a_function(): and class NotAClass."""
RETRY_LIMIT = 5
first, second = 1, 2

def count_attempts(obj):
    local_name = 3
    def inner_helper():
        pass
    return local_name

class Retrier:
    backoff_s = 0.5
    def run(self):
        self.attempts = 0

if True:
    FLAG = True
'''


def test_python_definitions_come_from_the_ast():
    assert definitions(MODULE) == ("RETRY_LIMIT", "first", "second", "count_attempts",
                                   "inner_helper", "Retrier", "backoff_s", "run", "FLAG")


def test_text_that_does_not_parse_falls_back_to_the_regex():
    diff = "--- a/retry.py\n+++ b/retry.py\n+def count_attempts(obj):\n+    return 0\n-def old(x):\n"
    assert definitions(diff) == ("count_attempts",)
    js = "export async function parseHeader(raw) {}\nconst MAX_SIZE = 10\nlet total = 0\n"
    assert definitions(js) == ("parseHeader", "MAX_SIZE", "total")
    assert definitions("pub fn read_all(path: &str) {}\nstruct Config {}\n") == ("read_all", "Config")


def test_logs_define_nothing():
    log = "2025-03-01 12:00:01 INFO worker job=12 status=ok took 35ms\nretries=0\n"
    assert definitions(log) == ()
    assert definitions("") == ()


def test_identifiers_are_words_of_two_or_more_characters():
    assert identifiers("x = count_attempts(job_1) + 3ms") == {"count_attempts", "job_1", "ms"}


def test_rank_hits_puts_ids_then_exact_then_folded_names_first():
    ranked = rank_hits(["m3"], [("m5", "a_name"), ("m9", "a_name"), ("m5", "b_name")],
                       [("m5", "a_name"), ("m7", "a_name")])
    assert ranked == ["m3", "m5", "m9", "m7"]

"""Failure signatures parsed from pytest output."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent_cli.memory.longterm.signatures import Failure, failure_signatures, parse_pytest

LONG = """\
=================================== FAILURES ===================================
___________________________________ test_one ___________________________________

    def test_one():
>       assert helper() == 2

tests/test_a.py:5: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

    def helper():
>       raise ValueError("bad value")
E       ValueError: bad value

tests/helpers.py:3: ValueError
_________________________________ TestK.test_m _________________________________

self = <test_a.TestK object at 0x7f4f4b44d590>

    def test_m(self):
>       assert "a" == "b"
E       AssertionError: assert 'a' == 'b'

tests/test_a.py:10: AssertionError
__________________________________ test_p[1.5] _________________________________

    def test_p(x):
>       assert x == 1
E       assert 1.5 == 1

tests/test_a.py:13: AssertionError
=========================== short test summary info ============================
FAILED tests/test_a.py::test_one - ValueError: bad value
FAILED tests/test_a.py::TestK::test_m - AssertionError: assert 'a' == 'b'
FAILED tests/test_a.py::test_p[1.5] - assert 1.5 == 1
========================= 3 failed, 2 passed in 0.04s ==========================
"""

COLLECTION = """\
==================================== ERRORS ====================================
__________________________ ERROR collecting tests/test_b.py ____________________
ImportError while importing test module '/repo/tests/test_b.py'.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_b.py:1: in <module>
    import nonexistent_mod
E   ModuleNotFoundError: No module named 'nonexistent_mod'
=========================== short test summary info ============================
ERROR tests/test_b.py
"""


def test_long_tracebacks_give_id_first_frame_and_error():
    assert parse_pytest(LONG) == [
        Failure("tests/test_a.py::test_one", "tests/test_a.py:5", "ValueError: bad value"),
        Failure(
            "tests/test_a.py::TestK::test_m",
            "tests/test_a.py:10",
            "AssertionError: assert 'a' == 'b'",
        ),
        Failure("tests/test_a.py::test_p[1.5]", "tests/test_a.py:13", "assert 1.5 == 1"),
    ]


def test_signature_is_one_searchable_line():
    assert failure_signatures(LONG)[0] == (
        "tests/test_a.py::test_one failed at tests/test_a.py:5: ValueError: bad value"
    )


def test_collection_error_skips_interpreter_frames():
    assert parse_pytest(COLLECTION) == [
        Failure(
            "tests/test_b.py",
            "tests/test_b.py:1",
            "ModuleNotFoundError: No module named 'nonexistent_mod'",
        )
    ]


def test_summary_alone_still_names_each_failure():
    out = "FAILED tests/test_x.py::test_y - KeyError: 'k'\n1 failed in 0.1s\n"
    assert failure_signatures(out) == ["tests/test_x.py::test_y failed: KeyError: 'k'"]


def test_reports_without_a_summary_build_the_id_from_the_frame():
    body = LONG.split("=========================== short")[0]
    assert parse_pytest(body)[1].test_id == "tests/test_a.py::TestK::test_m"


def test_passing_output_has_no_signatures():
    assert failure_signatures("..........                [100%]\n10 passed in 0.2s\n") == []


@pytest.mark.slow
def test_real_pytest_output_in_short_and_native_styles(tmp_path):
    (tmp_path / "test_real.py").write_text(
        textwrap.dedent("""
        def test_ok():
            pass
        def test_bad():
            assert {"a": 1}["a"] == 2
    """)
    )
    for style in ("short", "native", "long"):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                f"--tb={style}",
                "test_real.py",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        (failure,) = parse_pytest(out)
        assert failure.test_id == "test_real.py::test_bad", style
        assert failure.frame.endswith("test_real.py:5"), style
        assert "assert 1 == 2" in failure.error, style

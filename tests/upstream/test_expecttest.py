"""The expecttest stand-in (tests/upstream/site/expecttest.py) must really compare.

Run by scripts/upstream/run.sh before the upstream suite, with tests/upstream/site on sys.path.
"""
import unittest

import pytest

import expecttest


class _Case(expecttest.TestCase):
    def runTest(self):  # pragma: no cover - never run, the case only hosts the assertions
        pass


@pytest.fixture
def case(monkeypatch):
    monkeypatch.setattr(expecttest, "ACCEPT", None)
    return _Case()


def test_equal_text_passes(case):
    case.assertExpectedInline("def forward(self, x):\n    return x", """\
def forward(self, x):
    return x""")


@pytest.mark.parametrize("actual,expect", [
    ("a + b", "a - b"),
    ("a + b", "a + b "),          # no whitespace normalisation
    (" a + b", "a + b"),
    ("a\r\nb", "a\nb"),           # no newline normalisation
    ("a + b\nmore", "a + b"),     # trailing text that is not a C++ stack trace
    ("a", "a + b"),
])
def test_mismatch_fails(case, actual, expect):
    with pytest.raises(AssertionError):
        case.assertExpectedInline(actual, expect)


def test_cpp_stack_trace_suffix_is_allowed(case):
    case.assertExpectedInline("bad op\nException raised from foo at bar.cpp:1", "bad op")


def test_raises_inline(case):
    def boom():
        raise ValueError("no such target")
    case.assertExpectedRaisesInline(ValueError, boom, """no such target""")
    with pytest.raises(AssertionError):
        case.assertExpectedRaisesInline(ValueError, boom, """other message""")
    with pytest.raises(AssertionError):
        case.assertExpectedRaisesInline(ValueError, lambda: None, """no such target""")


def test_accept_is_reported_unsupported(case, monkeypatch):
    monkeypatch.setattr(expecttest, "ACCEPT", "1")
    with pytest.raises(AssertionError, match="EXPECTTEST_ACCEPT is not supported"):
        case.assertExpectedInline("new", """old""")
    case.assertExpectedInline("same", """same""")


def test_is_a_unittest_case():
    assert issubclass(expecttest.TestCase, unittest.TestCase)

"""A stand-in for the `expecttest` package (Debian 12 does not ship it), for the upstream run only.

torch.testing._internal.common_utils imports `expecttest` and derives its TestCase from
`expecttest.TestCase`; PyTorch's FX tests call `assertExpectedInline` and
`assertExpectedRaisesInline`. This module is on sys.path only while `make test-upstream` runs
PyTorch's own tests (scripts/upstream/run.sh); it is not part of the fxcpp package.

The comparison is the one expecttest makes: `actual` must equal the literal `expect` exactly.
The only thing expecttest itself forgives is a C++ stack trace that follows the expected text,
which must then start with "\\nException raised from" (errors raised through c10 carry one).
No whitespace, indentation or newline normalisation is applied.

EXPECTTEST_ACCEPT (rewriting the literals in the test sources) is NOT supported: with it set, an
assertion whose text differs fails and says so instead of editing the test file.
"""
import os
import unittest

__all__ = ["ACCEPT", "TestCase"]

# common_utils reads this and may set it from its --accept flag.
ACCEPT = os.getenv("EXPECTTEST_ACCEPT")

_CPP_STACK = "\nException raised from"


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        """Fails unless `actual` is `expect`, optionally followed by a C++ stack trace."""
        if ACCEPT and not self._matches_expected(actual, expect):
            self.fail("EXPECTTEST_ACCEPT is not supported by fxcpp's expecttest stand-in "
                      "(tests/upstream/site/expecttest.py); the output differs from the "
                      f"expected literal:\n--- expected\n{expect}\n--- actual\n{actual}")
        msg = "expected text differs (EXPECTTEST_ACCEPT is not supported by this stand-in)"
        self.assertGreaterEqual(len(actual), len(expect), msg)
        self.assertMultiLineEqual(expect, actual[:len(expect)], msg)
        if len(actual) > len(expect):
            self.assertEqual(actual[len(expect):len(expect) + len(_CPP_STACK)], _CPP_STACK, msg)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        """Calls `callable(*args, **kwargs)`; it must raise `exc_type` whose str() is `expect`."""
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(msg="Did not raise when expected to")

    @staticmethod
    def _matches_expected(actual, expect):
        if actual == expect:
            return True
        return actual.startswith(expect) and actual[len(expect):].startswith(_CPP_STACK)

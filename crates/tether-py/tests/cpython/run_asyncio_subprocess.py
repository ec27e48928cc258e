"""Runs CPython's own asyncio subprocess tests (Lib/test/test_asyncio/
test_subprocess.py, from the interpreter's `test` package) with
asyncio.create_subprocess_exec/_shell replaced by tether's — nothing else
changed — and prints how many of the tests that pass stock pass so.

    python run_asyncio_subprocess.py [--stock]

Tests that drive asyncio's internals (the loop's subprocess transport,
a patched subprocess.Popen) rather than create_subprocess_* are listed
in INTERNAL and reported apart."""

from __future__ import annotations

import asyncio
import asyncio.subprocess
import sys
import unittest

#: Tests about asyncio's transport or its use of subprocess.Popen, not
#: about create_subprocess_*'s contract.
INTERNAL = {
    "test_cancel_make_subprocess_transport_exec",  # loop.subprocess_exec
    "test_cancel_post_init",  # loop.subprocess_exec
    "test_close_kill_running",  # loop.subprocess_exec + a patched transport
    "test_close_dont_kill_finished",  # loop.subprocess_exec
    "test_popen_error",  # patches subprocess.Popen
    "test_popen_error_with_stdin_pipe",  # patches subprocess.Popen
    "test_pause_reading",  # reads Process._transport's pipe transports
}


def main() -> int:
    stock = "--stock" in sys.argv
    if not stock:
        import tether

        for module in (asyncio, asyncio.subprocess):
            module.create_subprocess_exec = tether.create_subprocess_exec  # type: ignore[assignment]
            module.create_subprocess_shell = tether.create_subprocess_shell  # type: ignore[assignment]
    from test.test_asyncio import test_subprocess as suite

    loader = unittest.TestLoader()
    tests = loader.loadTestsFromTestCase(suite.SubprocessThreadedWatcherTests)
    chosen = unittest.TestSuite(t for t in tests if t._testMethodName not in INTERNAL)
    result = unittest.TextTestRunner(verbosity=1, stream=sys.stderr).run(chosen)
    failed = {t._testMethodName for t, _ in result.failures + result.errors}
    ran = chosen.countTestCases()
    skipped = len(result.skipped)
    print(f"{'stock asyncio' if stock else 'tether'}: {ran - skipped - len(failed)} of "
          f"{ran - skipped} passed ({skipped} skipped, {len(INTERNAL)} internal left out)")
    for name in sorted(failed):
        print(f"  failed: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

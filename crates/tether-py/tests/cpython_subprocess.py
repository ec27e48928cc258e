"""CPython's own ``Lib/test/test_subprocess.py`` run against ``tether``.

The suite ships in CPython's ``test`` package. It subclasses
``subprocess.Popen`` at import time, and ``subprocess.run``/``call``/
``check_output``/``getoutput`` look ``Popen`` (and ``run``) up in the module
when called, so assigning ``subprocess.Popen = tether.Popen`` before the
import routes the whole suite through ``tether``.

    python cpython_subprocess.py [--mode popen|run|both] [--stock FILE]
                                 [--timeout S] [-k SUBSTRING] [-v]

* ``--mode popen``: ``subprocess.Popen = tether.Popen``;
  ``--mode run``: that and ``subprocess.run = tether.run``;
  ``--mode both`` (the default): one run of each, each in a fresh
  interpreter.
* First the stock suite runs once (a fresh interpreter, nothing replaced)
  to learn which tests pass here as they are: a test that fails or is
  skipped stock (root, platform, missing tools) says nothing about
  ``tether``. ``--stock FILE`` reuses (or writes, if absent) that list.
* Tests that judge CPython's implementation rather than ``subprocess``'s
  contract (``INTERNAL`` below, each with why) are set apart.
* What is left is "applicable". The runner prints pass/fail counts and
  every failing test, and exits 1 if a test fails that ``KNOWN`` (the
  differences ``docs/python.md`` documents, each with its reason) does not
  list — so a regression fails CI while the documented differences do not.
  A ``KNOWN`` test that passes is reported (the list should shrink).

Run it against the installed package (as .ci/python does), as root or not.
``TETHER_HOME`` is pointed at a temporary directory unless set.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Dict, List, Optional, Set

#: Tests of CPython's implementation, not of the contract ``subprocess``
#: documents: they patch or call private names, or check the byte format
#: of ``_posixsubprocess``'s error pipe.
INTERNAL: Dict[str, str] = {
    "ProcessTestCaseNoPoll": "ProcessTestCase again with subprocess._PopenSelector replaced "
                             "(CPython's choice of poll or select)",
    "ProcessTestCase.test__use_vfork": "mocks subprocess._fork_exec, checks subprocess._USE_VFORK",
    "ProcessTestCase.test_failed_child_execute_fd_leak": "overrides Popen._execute_child",
    "ProcessTestCase.test_repr": "mocks Popen._execute_child (and expects the class name 'Popen')",
    "POSIXProcessTestCase.test_exception_errpipe_normal": "mocks subprocess._fork_exec: the error pipe's format",
    "POSIXProcessTestCase.test_exception_errpipe_bad_data": "mocks subprocess._fork_exec: the error pipe's format",
    "POSIXProcessTestCase.test_fork_exec": "calls _posixsubprocess.fork_exec",
    "POSIXProcessTestCase.test_fork_exec_sorted_fd_sanity_check": "calls _posixsubprocess.fork_exec",
    "POSIXProcessTestCase.test_preexec_errpipe_does_not_double_close_pipes": "overrides Popen._execute_child",
    "POSIXProcessTestCase.test_zombie_fast_process_del": "looks for the Popen in subprocess._active",
    "POSIXProcessTestCase.test_leak_fast_process_del_killed": "looks for the Popen in subprocess._active",
    "POSIXProcessTestCase.test_stopped": "mocks os.waitpid inside Popen.wait",
    "POSIXProcessTestCase.test_send_signal_race": "mocks os.kill; reaps the child with os.waitpid behind Popen's back",
    "POSIXProcessTestCase.test_send_signal_race2": "mocks Popen.poll inside send_signal",
    "MiscTests.test_call_keyboardinterrupt_no_kill": "mocks Popen._communicate and Popen._wait",
    "MiscTests.test_run_keyboardinterrupt_no_kill": "mocks Popen._communicate and Popen._wait",
    "MiscTests.test_context_manager_keyboardinterrupt_no_kill": "mocks Popen._communicate and Popen._wait",
}

#: Applicable tests that still fail, each with the reason (the same list,
#: in words, is in docs/python.md, "Moving from subprocess").
KNOWN: Dict[str, str] = {}


def _test_name(test: unittest.TestCase) -> str:
    """``Class.method`` of a test."""
    return f"{type(test).__name__}.{test._testMethodName}"


def _internal(name: str) -> Optional[str]:
    cls = name.split(".", 1)[0]
    return INTERNAL.get(name) or INTERNAL.get(cls)


class _Alarm(Exception):
    pass


class _Result(unittest.TestResult):
    """Records one outcome per test: pass, fail, error, skip."""

    def __init__(self, timeout: float, verbose: bool) -> None:
        super().__init__()
        self.outcomes: Dict[str, str] = {}
        self.details: Dict[str, str] = {}
        self.timeout = timeout
        self.verbose = verbose
        self._began = 0.0

    def startTest(self, test: unittest.TestCase) -> None:  # noqa: N802
        super().startTest(test)
        self._began = time.monotonic()
        # A hang fails the one test (the handler raises in it), not the run.
        signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def stopTest(self, test: unittest.TestCase) -> None:  # noqa: N802
        signal.setitimer(signal.ITIMER_REAL, 0)
        name = _test_name(test)
        self.outcomes.setdefault(name, "pass")
        if self.verbose:
            print(f"{self.outcomes[name]:5} {time.monotonic() - self._began:6.2f}s {name}", file=sys.stderr, flush=True)
        super().stopTest(test)

    def _record(self, test: unittest.TestCase, outcome: str, err: object = None) -> None:
        if not isinstance(test, unittest.TestCase):  # a module/class fixture
            return
        name = _test_name(test)
        if self.outcomes.get(name) in ("fail", "error") and outcome == "pass":
            return
        self.outcomes[name] = outcome
        if err is not None:
            self.details[name] = self._exc_info_to_string(err, test)  # type: ignore[arg-type]

    def addSuccess(self, test):  # noqa: N802, ANN001
        self._record(test, "pass")

    def addFailure(self, test, err):  # noqa: N802, ANN001
        super().addFailure(test, err)
        self._record(test, "fail", err)

    def addError(self, test, err):  # noqa: N802, ANN001
        super().addError(test, err)
        self._record(test, "error", err)

    def addSkip(self, test, reason):  # noqa: N802, ANN001
        self._record(test, "skip")

    def addExpectedFailure(self, test, err):  # noqa: N802, ANN001
        self._record(test, "pass")

    def addUnexpectedSuccess(self, test):  # noqa: N802, ANN001
        self._record(test, "fail")

    def addSubTest(self, test, subtest, err):  # noqa: N802, ANN001
        if err is not None:
            super().addSubTest(test, subtest, err)
            outcome = "fail" if issubclass(err[0], test.failureException) else "error"
            self._record(test, outcome, err)


def _alarm(signum: int, frame: object) -> None:
    raise _Alarm("the test ran past the runner's per-test timeout")


def run_suite(mode: str, only: Optional[str], timeout: float, verbose: bool) -> Dict[str, object]:
    """Runs the suite in this interpreter; ``mode``: stock, popen, run."""
    os.environ.setdefault("TETHER_HOME", tempfile.mkdtemp(prefix="tether-cpython-"))
    if mode != "stock":
        import tether

        subprocess.Popen = tether.Popen  # type: ignore[misc]
        if mode == "run":
            subprocess.run = tether.run  # type: ignore[assignment]
    from test import support
    import test.test_subprocess as module

    # Make sure a test running long prints nothing to the terminal's stdin.
    support.verbose = False
    signal.signal(signal.SIGALRM, _alarm)
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromModule(module)

    def selected(s: unittest.TestSuite) -> unittest.TestSuite:
        out = unittest.TestSuite()
        for t in s:
            if isinstance(t, unittest.TestSuite):
                out.addTest(selected(t))
            elif only is None or only in _test_name(t):
                out.addTest(t)
        return out

    result = _Result(timeout, verbose)
    suite = selected(suite)
    began = time.monotonic()
    suite.run(result)
    return {
        "mode": mode,
        "python": sys.version.split()[0],
        "seconds": round(time.monotonic() - began, 1),
        "outcomes": result.outcomes,
        "details": result.details,
    }


def _child(mode: str, args: argparse.Namespace) -> Dict[str, object]:
    """Runs ``mode`` in a fresh interpreter (each replacement starts clean)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        command = [sys.executable, os.path.abspath(__file__), "--one", mode, "--json", out.name,
                   "--timeout", str(args.timeout)]
        if args.k:
            command += ["-k", args.k]
        if args.verbose:
            command.append("-v")
        # The suite's children write to the terminal (and the suite warns
        # on stderr): shown only with -v or if the run itself failed.
        done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=None if args.verbose else subprocess.PIPE)
        text = out.read()
        if done.returncode != 0 or not text:
            if done.stderr:
                sys.stderr.write(done.stderr.decode(errors="replace")[-20000:])
            sys.exit(f"cpython_subprocess: the {mode} run exited with {done.returncode}")
        return json.loads(text)


def report(stock: Dict[str, str], run: Dict[str, object], show_details: bool) -> bool:
    """Prints the counts and failures of one run; False if a test not in
    ``KNOWN`` failed."""
    outcomes: Dict[str, str] = run["outcomes"]  # type: ignore[assignment]
    details: Dict[str, str] = run["details"]  # type: ignore[assignment]
    passing_stock = sorted(n for n, o in stock.items() if o == "pass")
    internal = [n for n in passing_stock if _internal(n)]
    applicable = [n for n in passing_stock if not _internal(n) and (run_filter is None or run_filter in n)]
    failed = [n for n in applicable if outcomes.get(n) != "pass"]
    passed = len(applicable) - len(failed)
    print(f"== {run['mode']}: {passed} of {len(applicable)} applicable tests pass "
          f"(CPython {run['python']}, {run['seconds']} s; {len(stock)} tests, "
          f"{len(stock) - len(passing_stock)} not passing stock, {len(internal)} of CPython's internals set apart)")
    unexpected = []
    for name in failed:
        known = KNOWN.get(name)
        print(f"   {outcomes.get(name, 'missing'):5} {name}" + (f"  [known: {known}]" if known else "  [NOT KNOWN]"))
        if known is None:
            unexpected.append(name)
            if show_details and name in details:
                print("      " + details[name].rstrip().replace("\n", "\n      "))
    for name in sorted(KNOWN):
        if name in applicable and name not in failed:
            print(f"   pass  {name}  [listed in KNOWN: remove it]")
    return not unexpected


run_filter: Optional[str] = None


def main() -> int:
    global run_filter
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["popen", "run", "both"], default="both")
    parser.add_argument("--stock", help="file with the stock outcomes (reused if present)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    parser.add_argument("-k", help="only tests whose Class.method contains this")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--details", action="store_true", help="print the tracebacks of unexpected failures")
    parser.add_argument("--one", choices=["stock", "popen", "run"], help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        result = run_suite(args.one, args.k, args.timeout, args.verbose)
        with open(args.json, "w") as f:
            json.dump(result, f)
        # The suite leaves threads and children behind on failures: don't
        # wait for them.
        sys.stdout.flush()
        os._exit(0)
    run_filter = args.k
    stock: Optional[Dict[str, str]] = None
    if args.stock and os.path.exists(args.stock):
        with open(args.stock) as f:
            stock = json.load(f)
    if stock is None:
        stock_run = _child("stock", argparse.Namespace(**{**vars(args), "k": None}))
        stock = stock_run["outcomes"]  # type: ignore[assignment]
        print(f"== stock: {sum(o == 'pass' for o in stock.values())} of {len(stock)} pass "
              f"({stock_run['seconds']} s)")
        if args.stock:
            with open(args.stock, "w") as f:
                json.dump(stock, f)
    ok = True
    for mode in (["popen", "run"] if args.mode == "both" else [args.mode]):
        ok = report(stock, _child(mode, args), args.details) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

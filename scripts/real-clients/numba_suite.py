"""Runs numba-cuda's own test suite (numba.cuda.tests.<package>) on the CPU libcuda and reports
passed / failed / skipped per package, and the failures grouped by cause.

Each test module runs in a child process of its own (`--child`), with unittest (numba's tests
are unittest classes; numba-cuda's pytest setup needs its repository's conftest), so a kernel
fault's sticky context error, a crash or a hang stays inside one module: a child that dies or
passes `--timeout` seconds in one test has that test recorded as crashed / timed out and is
started again after it. A child writes one JSON line per test (`<out>/<module>.jsonl`) with the
test's outcome, its error and the libcuda log lines it printed (`STREAMEXEC_CUDA_LOG=1`), from
which the cause of a failure is taken: the detail of the last failed driver call with the code
the Python exception names, else the exception's own line, with names and numbers masked.

    python numba_suite.py --out DIR [--jobs N] [--timeout S] [--only FILE] PACKAGE...

`--only FILE` runs the test ids (`module.Class.test`) or modules listed in FILE, one a line.
Run by scripts/real-clients.sh, which sets up the environment.
"""

import argparse
import collections
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest

# ---------------------------------------------------------------------------------------------
# Child: one module.


class Recorder(unittest.TestResult):
    """Writes a JSON line per test: its outcome, error text, time and captured libcuda lines."""

    def __init__(self, out, timeout):
        super().__init__()
        self.out = out
        self.timeout = timeout
        self.current = None
        self.started = 0.0
        self.outcome = None
        self.error = ""
        self.capture = None
        self.saved_fd = None
        watchdog = threading.Thread(target=self._watch, daemon=True)
        watchdog.start()

    def _write(self, rec):
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def _watch(self):
        while True:
            time.sleep(1)
            test = self.current
            if test is not None and time.time() - self.started > self.timeout:
                self._write({"id": test, "outcome": "timeout", "secs": self.timeout,
                             "error": f"no result after {self.timeout} s", "log": []})
                os._exit(3)

    def startTest(self, test):
        super().startTest(test)
        sys.stdout.flush()
        sys.stderr.flush()
        self.capture = tempfile.TemporaryFile()
        self.saved_fd = os.dup(2)
        os.dup2(self.capture.fileno(), 2)
        self.outcome, self.error = None, ""
        self._write({"start": test.id()})
        self.started = time.time()
        self.current = test.id()

    def stopTest(self, test):
        self.current = None
        secs = time.time() - self.started
        sys.stderr.flush()
        os.dup2(self.saved_fd, 2)
        os.close(self.saved_fd)
        self.capture.seek(0)
        text = self.capture.read().decode("utf-8", "replace")
        self.capture.close()
        log = [line for line in text.splitlines() if "libcuda (streamexec)" in line]
        self._write({"id": test.id(), "outcome": self.outcome or "passed", "secs": round(secs, 3),
                     "error": self.error, "log": log[-40:]})
        super().stopTest(test)

    def _fail(self, kind, err, test=None):
        if self.outcome not in ("failed", "error"):
            self.outcome = kind
            self.error = "".join(traceback.format_exception(*err))[-6000:]

    def addError(self, test, err):
        if issubclass(err[0], unittest.SkipTest) or err[0].__name__ == "Skipped":
            # A skip raised outside the test method (setUpClass, pytest.skip in a fixture).
            self.addSkip(test, str(err[1]))
            return
        if self.current is None:  # setUpClass / tearDownClass / module fixtures
            self._write({"id": test.id(), "outcome": "error", "secs": 0,
                         "error": "".join(traceback.format_exception(*err))[-6000:], "log": []})
            return
        self._fail("error", err)

    def addFailure(self, test, err):
        self._fail("failed", err)

    def addSubTest(self, test, subtest, err):
        if err is not None:
            kind = "failed" if issubclass(err[0], test.failureException) else "error"
            self._fail(kind, err)

    def addSkip(self, test, reason):
        if self.current is None:
            self._write({"id": test.id(), "outcome": "skipped", "secs": 0, "error": reason,
                         "log": []})
            return
        self.outcome, self.error = "skipped", reason

    def addExpectedFailure(self, test, err):
        self.outcome = "passed"

    def addUnexpectedSuccess(self, test):
        self.outcome, self.error = "failed", "unexpected success"


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def child(module, results, timeout, skip, only):
    with open(results, "a") as out:
        try:
            mod = importlib.import_module(module)
            suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
        except BaseException as e:  # pytest.skip at import, missing optional modules, ...
            skipped = type(e).__name__ in ("Skipped", "SkipTest")
            out.write(json.dumps({"id": module, "outcome": "skipped" if skipped else "error",
                                  "secs": 0, "error": traceback.format_exc()[-6000:],
                                  "log": []}) + "\n")
            return
        tests = [t for t in flatten(suite)
                 if t.id() not in skip and (not only or t.id() in only or module in only)]
        unittest.TestSuite(tests).run(Recorder(out, timeout))


# ---------------------------------------------------------------------------------------------
# Parent: modules in child processes, then the report.


def modules_of(package):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{package} is not a package")
    names = []
    for d in spec.submodule_search_locations:
        for f in sorted(os.listdir(d)):
            if f.startswith("test_") and f.endswith(".py"):
                names.append(f"{package}.{f[:-3]}")
    return names


def read_records(path):
    done, started = {}, None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "start" in rec:
                    started = rec["start"]
                else:
                    done[rec["id"]] = rec
                    if rec["id"] == started:
                        started = None
    return done, started


def run_module(module, out, timeout, only, exclude=()):
    """Runs `module` in children until every test has a record; returns the records."""
    results = os.path.join(out, module + ".jsonl")
    if os.path.exists(results):
        os.remove(results)
    for _ in range(200):
        done, started = read_records(results)
        skip = set(done) | set(exclude)
        cmd = [sys.executable, __file__, "--child", module, "--results", results,
               "--timeout", str(timeout)]
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("\n".join(sorted(skip)))
            cmd += ["--skip", f.name]
        if only:
            cmd += ["--only-ids", only]
        with open(os.path.join(out, module + ".out"), "a") as log:
            p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
        os.remove(f.name)
        done, started = read_records(results)
        if p.returncode == 0 or started is None:
            return done
        # The child died in `started`: record it, go on after it.
        how = f"the process died (exit {p.returncode})" if p.returncode > 0 else \
            f"the process was killed by signal {-p.returncode}"
        with open(results, "a") as f:
            f.write(json.dumps({"id": started, "outcome": "crashed", "secs": 0,
                                "error": how, "log": []}) + "\n")
    return read_records(results)[0]


MASKS = [
    (re.compile(r"`_Z[^`]*`"), "`<mangled>`"),
    (re.compile(r"kernel `[^`]*`: "), ""),
    (re.compile(r"in `[^`]*`, "), ""),
    (re.compile(r"PTX line \d+: `[^`]*`: "), ""),
    (re.compile(r"PTX line \d+"), "PTX line N"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x…"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "N"),
    (re.compile(r"'[^']{40,}'"), "'…'"),
]


def mask(text):
    for pat, rep in MASKS:
        text = pat.sub(rep, text)
    return text.strip()[:220]


NOISE = re.compile(r"cuGetProcAddress|cuGetExportTable|CUDA_ERROR_NOT_READY")


def cause(rec):
    """What made a failed test fail, for grouping."""
    if rec["outcome"] in ("crashed", "timeout"):
        return f"{rec['outcome']}: {rec['error']}"
    lines = [ln.strip() for ln in rec["error"].strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else rec["outcome"]
    log = [ln.split("libcuda (streamexec): ", 1)[1] for ln in rec["log"]
           if not NOISE.search(ln) and "libcuda (streamexec): " in ln]
    code = re.search(r"CUDA_ERROR_[A-Z_]+", last)
    if code:
        hits = [ln for ln in log if code.group(0) in ln]
        if hits:
            return "libcuda: " + mask(hits[-1])
    faults = [ln for ln in log if "failed: block" in ln]
    if faults:
        detail = faults[-1].split("): ", 1)[-1]
        return "kernel fault: " + mask(detail)
    return mask(last)


def report(packages, records, elapsed, out):
    rows, groups = [], collections.defaultdict(list)
    for package in packages:
        counts = collections.Counter()
        for module, recs in records.items():
            if not module.startswith(package + "."):
                continue
            for rec in recs.values():
                o = rec["outcome"]
                counts["passed" if o == "passed" else "skipped" if o == "skipped" else "failed"] += 1
                if o not in ("passed", "skipped"):
                    groups[cause(rec)].append(rec["id"])
        rows.append((package, counts))
    print()
    print(f"{'package':<36} {'passed':>7} {'failed':>7} {'skipped':>8} {'run':>6}")
    total = collections.Counter()
    for package, c in rows:
        total.update(c)
        print(f"{package:<36} {c['passed']:>7} {c['failed']:>7} {c['skipped']:>8} "
              f"{c['passed'] + c['failed']:>6}")
    print(f"{'total':<36} {total['passed']:>7} {total['failed']:>7} {total['skipped']:>8} "
          f"{total['passed'] + total['failed']:>6}")
    print(f"\nfailures by cause ({len(groups)} causes; {elapsed:.0f} s):")
    for why, ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"{len(ids):5}  {why}")
        print(f"       e.g. {ids[0]}")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"packages": {p: dict(c) for p, c in rows},
                   "causes": {k: v for k, v in groups.items()}, "seconds": elapsed}, f, indent=1)
    run = total["passed"] + total["failed"]
    rate = 100.0 * total["passed"] / run if run else 0.0
    print(f"\npassed {total['passed']} of {run} run ({rate:.1f}%), {total['skipped']} skipped")
    return rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("packages", nargs="*")
    ap.add_argument("--out", default="target/real-clients-results")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--min-rate", type=float, default=100.0,
                    help="exit non-zero when fewer than this percentage of the run tests pass")
    ap.add_argument("--only", help="file of test ids or modules to run, one a line")
    ap.add_argument("--child")
    ap.add_argument("--results")
    ap.add_argument("--skip")
    ap.add_argument("--only-ids")
    a = ap.parse_args()
    if a.child:
        skip = set(open(a.skip).read().split()) if a.skip else set()
        only = set(open(a.only_ids).read().split()) if a.only_ids else set()
        child(a.child, a.results, a.timeout, skip, only)
        return
    os.makedirs(a.out, exist_ok=True)
    only, exclude = set(), set()
    if a.only:
        lines = [ln.strip() for ln in open(a.only) if ln.strip() and not ln.startswith("#")]
        # `-ID`: a test of a listed module that is not run (the file says why).
        exclude = {ln[1:].strip() for ln in lines if ln.startswith("-")}
        only = {ln for ln in lines if not ln.startswith("-")}
    modules = [m for p in a.packages for m in modules_of(p)]
    if only:
        modules = [m for m in modules if m in only or any(i.startswith(m + ".") for i in only)]
    start = time.time()
    records = {}
    lock = threading.Lock()
    queue = list(modules)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                module = queue.pop(0)
            recs = run_module(module, a.out, a.timeout,
                              os.path.abspath(a.only) if a.only else None, exclude)
            with lock:
                records[module] = recs
                c = collections.Counter(r["outcome"] for r in recs.values())
                print(f"{module}: " + ", ".join(f"{v} {k}" for k, v in sorted(c.items())),
                      flush=True)

    threads = [threading.Thread(target=worker) for _ in range(max(1, a.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rate = report(a.packages, records, time.time() - start, a.out)
    sys.exit(0 if rate >= a.min_rate else 1)


if __name__ == "__main__":
    main()

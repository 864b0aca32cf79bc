"""Long fuzz campaign over every public entry point (``make fuzz``).

Runs the hypothesis tests of ``tests/test_fuzz.py`` in batches, each batch in its own
subprocess with its own seed, so that a crash (segfault, abort) or a hang ends only that batch
and is detected. For every problem it prints what to rerun (the test, seed and number of
examples: the run is deterministic for a seed) and the input: hypothesis' falsifying example
for a failed property or an unexpected exception, and for a crash or hang the last input the
test wrote before it died.

Usage:
    python tools/fuzz.py [--inputs 100000] [--jobs 1] [--seed S] [--tests NAME,...]
                         [--scale 1.0] [--timeout 1200] [--no-huge-costs]
    python tools/fuzz.py --worker TEST --result FILE   (one batch; set up by the campaign)

Exit status 0 when every batch passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
FUZZ_FILE = TESTS / "test_fuzz.py"

#: Examples per batch, per test (slow tests get smaller batches, so that batches take
#: similar times and a crash loses little); tests not listed get DEFAULT_BATCH.
BATCH = {
    "test_fuzz_bedl": 150,
    "test_fuzz_batches": 500,
    "test_fuzz_pairwise_distances": 600,
    "test_fuzz_single_pair_ops": 1000,
}
DEFAULT_BATCH = 2000


def fuzz_tests() -> list:
    """Names of the hypothesis tests in tests/test_fuzz.py, in file order."""
    tree = ast.parse(FUZZ_FILE.read_text())
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_fuzz_")]


# ------------------------------------------------------------------------------ one batch
def run_worker(test: str, result_path: str) -> None:
    """Run one hypothesis test in this process and write a JSON result (inputs run, outcome,
    error with hypothesis' falsifying example)."""
    sys.path[:0] = [str(REPO), str(TESTS)]
    import test_fuzz

    outcome, kind, error = "passed", None, None
    try:
        getattr(test_fuzz, test)()
    except BaseException as exc:  # everything, to report it; a crash never gets here
        outcome = "failed"
        message = str(exc)
        if isinstance(exc, AssertionError):
            kind = "non-finite result" if "non-finite" in message else "property violated"
        else:
            kind = f"unexpected exception ({type(exc).__name__})"
        error = "".join(traceback.format_exception(exc))
    inputs = sum(test_fuzz.COUNTS.values())
    with open(result_path, "w") as f:
        json.dump({"test": test, "inputs": inputs, "outcome": outcome, "kind": kind,
                   "error": error}, f)
    print(f"{test}: {inputs} inputs, {outcome}" + (f": {kind}\n{error}" if error else ""))


# ------------------------------------------------------------------------------ the campaign
def run_batch(test: str, examples: int, seed: int, timeout: float, flags: dict) -> dict:
    """One batch in a subprocess: its result, or a crash or hang with the last input."""
    with tempfile.TemporaryDirectory(prefix="bedl_fuzz_") as tmp:
        trace = os.path.join(tmp, "input.txt")
        result = os.path.join(tmp, "result.json")
        env = dict(os.environ, BEDL_FUZZ_EXAMPLES=str(examples), BEDL_FUZZ_SEED=str(seed),
                   BEDL_FUZZ_TRACE=trace, **flags)
        cmd = [sys.executable, "-X", "faulthandler", str(pathlib.Path(__file__).resolve()),
               "--worker", test, "--result", result]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=timeout)
            status, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            status = None
            output = (exc.stdout or b"").decode(errors="replace") + \
                (exc.stderr or b"").decode(errors="replace")
        seconds = time.perf_counter() - start
        last_input = open(trace).read() if os.path.exists(trace) else "(none recorded)"
        rerun = (f"BEDL_FUZZ_SEED={seed} BEDL_FUZZ_EXAMPLES={examples} "
                 + "".join(f"{k}={v} " for k, v in flags.items())
                 + f"python tools/fuzz.py --worker {test} --result /tmp/result.json")
        base = {"test": test, "seed": seed, "examples": examples, "seconds": seconds,
                "rerun": rerun}
        if status == 0 and os.path.exists(result):
            with open(result) as f:
                return dict(base, **json.load(f))
        if status is None:
            kind = f"hang (over {timeout:.0f} s)"
        elif status < 0:
            kind = f"crash (signal {-status})"
        else:
            kind = f"crash (exit status {status})"
        # the trace's header counts the inputs this process ran, the last one included
        header = last_input.split("\n", 1)[0]
        ran = int(header.split("input ")[1].split()[0]) if "input " in header else None
        return dict(base, inputs=ran, outcome="failed", kind=kind,
                    error=f"last input:\n{last_input[:20000]}\noutput:\n{output[-8000:]}")


def campaign(args) -> int:
    tests = fuzz_tests()
    if args.tests:
        wanted = [t if t.startswith("test_fuzz_") else f"test_fuzz_{t}" for t in args.tests.split(",")]
        unknown = sorted(set(wanted) - set(tests))
        if unknown:
            sys.exit(f"unknown tests: {unknown}; the tests are {tests}")
        tests = wanted
    base_seed = args.seed if args.seed is not None else int(time.time()) % 100_000 * 1000
    flags = {"BEDL_FUZZ_HUGE_COSTS": "0" if args.no_huge_costs else "1"}
    print(f"fuzz campaign: {len(tests)} tests, at least {args.inputs} inputs, seeds from "
          f"{base_seed}, {args.jobs} job(s), {flags}", flush=True)
    start = time.perf_counter()
    totals = {t: 0 for t in tests}
    problems = []
    batches = 0

    def next_batches(count):
        nonlocal batches
        out = []
        for _ in range(count):
            test = tests[batches % len(tests)]
            examples = max(1, int(BATCH.get(test, DEFAULT_BATCH) * args.scale))
            out.append((test, examples, base_seed + batches))
            batches += 1
        return out

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        while sum(totals.values()) < args.inputs:
            # a round: every test once (the loop's bound is checked between rounds)
            plan = next_batches(len(tests))
            for result in pool.map(lambda p: run_batch(*p, args.timeout, flags), plan):
                inputs = result["inputs"] or 0
                totals[result["test"]] += inputs
                line = (f"[{time.perf_counter() - start:7.0f} s] {result['test']:<40} seed "
                        f"{result['seed']:<9} {inputs:>6} inputs {result['seconds']:6.1f} s "
                        f"{result['outcome']}" + (f": {result['kind']}" if result["kind"] else ""))
                print(line, flush=True)
                if result["outcome"] != "passed":
                    problems.append(result)
                    print(f"    rerun: {result['rerun']}\n" +
                          "\n".join("    " + s for s in str(result["error"]).splitlines()[-60:]),
                          flush=True)

    elapsed = time.perf_counter() - start
    kinds = {}
    for p in problems:
        kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
    print("\nsummary")
    for test, count in totals.items():
        print(f"  {test:<40} {count:>8} inputs")
    print(f"  {'total':<40} {sum(totals.values()):>8} inputs in {batches} batches, {elapsed:.0f} s")
    crashes = sum(v for k, v in kinds.items() if k.startswith(("crash", "hang")))
    print(f"  crashes and hangs: {crashes}")
    print(f"  non-finite results: {kinds.get('non-finite result', 0)}")
    print(f"  property violations: {kinds.get('property violated', 0)}")
    print(f"  unexpected exceptions: "
          f"{sum(v for k, v in kinds.items() if k.startswith('unexpected'))}")
    return 1 if problems else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000,
                        help="run rounds of batches until at least this many inputs ran")
    parser.add_argument("--jobs", type=int, default=1, help="batches run at the same time")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first batch")
    parser.add_argument("--tests", default="", help="comma-separated tests (default: all)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the batch sizes")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per batch")
    parser.add_argument("--no-huge-costs", action="store_true",
                        help="leave out costs whose path sums come near overflow")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args.worker, args.result)
        return 0
    return campaign(args)


if __name__ == "__main__":
    sys.exit(main())

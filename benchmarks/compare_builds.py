"""bench_core.py on two builds in one run: rounds alternate between them, so that both see the
same phases of the machine; prints each row's median time for both and their ratio.

Build the older commit in a worktree first, e.g.
    git worktree add /tmp/base <commit> && (cd /tmp/base && ../path/.venv/bin/python setup.py build_ext --inplace)
then
    .venv/bin/python benchmarks/compare_builds.py /tmp/base . --rounds 3 --only pair100 pairwise30 sequences
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_bench(tree: str, only, quick: bool) -> dict:
    """{row name: bedl_torch seconds} from one bench_core.py run against the package in `tree`."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    cmd = [sys.executable, os.path.join(HERE, "bench_core.py"), "--only", *only] + (["--quick"] if quick else [])
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("measurement", "---"):
            try:
                rows[cells[0]] = float(cells[1])
            except ValueError:
                pass
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", help="source tree of the older build (with its extension built in place)")
    parser.add_argument("head", help="source tree of the newer build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", default=["pair100", "pairwise30", "sequences"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    times = {"base": {}, "head": {}}
    for _ in range(args.rounds):
        for side in ("base", "head"):
            for name, t in run_bench(getattr(args, side), args.only, args.quick).items():
                times[side].setdefault(name, []).append(t)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores; {args.rounds} alternating rounds; medians of bedl_torch's column")
    print()
    print("| measurement | base | head | head / base |")
    print("|---|---|---|---|")
    for name, base in times["base"].items():
        head = times["head"].get(name)
        if not head:
            continue
        b, h = statistics.median(base), statistics.median(head)
        print(f"| {name} | {b:.4g} | {h:.4g} | {h / b:.3f} |")


if __name__ == "__main__":
    main()

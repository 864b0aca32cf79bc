"""What holding the numerical libraries to their AVX2 paths costs: the same protocol command on
the AVX2 paths (the default) and on the native paths (--native-paths), in alternating
processes, wall-clock seconds of each.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_numeric_paths.py [--rounds 3]
[--dataset cystic]``. The command is one outer fold with one beta factor, BEDL in pseudo and
exact mode, MGLVQ and KNN (the BEDL fits and classifiers dominate the protocol's time); its
process start (the AVX2 paths re-execute the interpreter once) is included.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import cpu_model, load_average


def run(dataset: str, native: bool, out: str) -> float:
    cmd = [sys.executable, "-m", "bedl_torch", "experiment", dataset, "--max-folds", "1",
           "--beta-factors", "0.0001", "--metrics", "initial", "bedl_pseudo", "bedl_exact",
           "--classifiers", "MGLVQ", "KNN", "--no-progress", "--restart", "--out", out]
    if native:
        cmd.append("--native-paths")
    env = {k: v for k, v in os.environ.items() if k != "BEDL_TORCH_NUMERIC_PATHS"}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dataset", default="cystic")
    args = p.parse_args(argv)
    times = {"avx2": [], "native": []}
    load0 = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name in ("avx2", "native"):
                times[name].append(run(args.dataset, name == "native", os.path.join(tmp, name)))
    a, n = statistics.median(times["avx2"]), statistics.median(times["native"])
    print(f"CPU: {cpu_model()}; {args.rounds} alternating rounds; load average {load0} -> {load_average()}")
    print()
    print("| paths | wall s (median) | all rounds |")
    print("|---|---|---|")
    print(f"| AVX2 (default) | {a:.1f} | {', '.join(f'{t:.1f}' for t in times['avx2'])} |")
    print(f"| native (--native-paths) | {n:.1f} | {', '.join(f'{t:.1f}' for t in times['native'])} |")
    print(f"| AVX2 / native | {a / n:.3f} | |")


if __name__ == "__main__":
    main()

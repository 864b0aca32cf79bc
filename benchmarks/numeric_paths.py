"""How far the protocol's records move with the numerical libraries' instruction-set paths:
runs of the same command on the AVX2 paths (the reference) and on other, equally valid paths,
compared fold by fold and cell by cell over the folds both have.

    python benchmarks/numeric_paths.py REFERENCE/results.json NAME=VARIANT/results.json ...

prints, per variant, how many of the records (data set, classifier, metric, fold) differ in
their test error or chosen hyper-parameter, and per cell (classifier x metric) the mean test
error over the common folds on the reference and the variant and their difference (points).
"""
from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict


def _records(path):
    data = json.load(open(path))
    out = {}
    for r in data["records"]:
        if r.get("error") is None:
            continue
        out[(r["classifier"], r["metric"], int(r["fold"]))] = (float(r["error"]), r.get("value"))
    session = data["environment"]["sessions"][-1]
    return out, session.get("numeric_paths", {})


def _same_value(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(f"{float(a):.6g}") == float(f"{float(b):.6g}")  # compact files round to 6 digits
        except (TypeError, ValueError):
            return a == b
    return a == b


def compare(reference, variants):
    ref, _ = _records(reference)
    lines = []
    summary = ["| variant | paths | common folds | records differing | largest cell move [points] |",
               "|---|---|---|---|---|"]
    cells_table = {}
    for name, path in variants:
        var, paths = _records(path)
        common = sorted(set(ref) & set(var))
        folds = sorted({k[2] for k in common})
        differ = [k for k in common if not _same_value(ref[k][0], var[k][0]) or not _same_value(ref[k][1], var[k][1])]
        by_cell = defaultdict(lambda: ([], []))
        for k in common:
            by_cell[(k[0], k[1])][0].append(ref[k][0])
            by_cell[(k[0], k[1])][1].append(var[k][0])
        moves = {c: 100.0 * (statistics.mean(v) - statistics.mean(r)) for c, (r, v) in by_cell.items()}
        cells_table[name] = (by_cell, moves)
        env = paths.get("environment", {})
        desc = ", ".join(f"{k}={v}" for k, v in env.items()) or paths.get("mode", "?")
        largest = max((abs(m) for m in moves.values()), default=0.0)
        summary.append(f"| {name} | {desc} | {folds[0] if folds else '-'}-{folds[-1] if folds else '-'} "
                       f"| {len(differ)} of {len(common)} | {largest:.1f} |")
    lines += summary
    for name, (by_cell, moves) in cells_table.items():
        lines += ["", f"**{name}**: mean test error [%] over the common folds, reference -> variant",
                  "", "| classifier | metric | reference | variant | move [points] |", "|---|---|---|---|---|"]
        for (clf, metric), (r, v) in sorted(by_cell.items()):
            lines.append(f"| {clf} | {metric} | {100 * statistics.mean(r):.1f} | {100 * statistics.mean(v):.1f} "
                         f"| {moves[(clf, metric)]:+.1f} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference")
    p.add_argument("variants", nargs="+", help="NAME=PATH of a variant's results.json")
    args = p.parse_args(argv)
    print(compare(args.reference, [tuple(v.split("=", 1)) for v in args.variants]))


if __name__ == "__main__":
    main()

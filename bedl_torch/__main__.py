"""Command line: ``python -m bedl_torch experiment DATASET [options]`` and
``python -m bedl_torch pairwise INPUT --out D.npy`` (a distance matrix written tile by tile,
also as ``torchrun --nproc_per_node=P -m bedl_torch pairwise ...``; see
:mod:`bedl_torch.distributed`).

``experiment`` runs the paper's cross-validation protocol on one data set (see
:mod:`bedl_torch.evaluation.protocol`), prints a Markdown table shaped like the paper's (rows:
classifiers and the metric-learning runtime; columns: initial, GESL, BEDL pseudo / exact; test
error in % as mean +- std over the folds) and writes ``OUT/results.json`` (one record per data
set, classifier, metric and fold, rewritten after every fold) and ``OUT/embedding.png`` (PCA of
the learned BEDL embedding of the last fold). Ctrl-C stops after writing the partial results.
"""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    from .evaluation.protocol import CLASSIFIERS, METRICS, PAPER_FOLDS

    p = argparse.ArgumentParser(prog="python -m bedl_torch",
                                description="bedl_torch command line")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("experiment", help="run the paper's cross-validation on one data set",
                       description="Cross-validation of initial / GESL / BEDL distances with "
                                   "KNN, MGLVQ, SVM and goodness classifiers (the paper's Table).")
    e.add_argument("dataset", choices=sorted(PAPER_FOLDS), type=str.lower)
    e.add_argument("--folds", type=int, default=None,
                   help="outer folds (default: the paper's: "
                        + ", ".join(f"{k} {v}" for k, v in PAPER_FOLDS.items()) + ")")
    e.add_argument("--inner-folds", type=int, default=5, help="nested search folds (default 5)")
    e.add_argument("--quick", action="store_true",
                   help="small hyper-parameter grid and short BEDL runs (smoke test)")
    e.add_argument("--max-folds", type=int, default=None,
                   help="stop after this many outer folds")
    e.add_argument("--metrics", nargs="+", choices=METRICS, default=list(METRICS))
    e.add_argument("--classifiers", nargs="+", choices=CLASSIFIERS, default=list(CLASSIFIERS))
    e.add_argument("--train-sample", type=int, default=None,
                   help="train on a random sample of this many points per training fold "
                        "(default: 300 for sentiment, as in the paper; else all)")
    e.add_argument("--beta-factors", type=float, nargs="+", default=None,
                   help="BEDL beta = 2 K m FACTOR candidates (default: the grid's; one value "
                        "skips the nested search)")
    e.add_argument("--gesl-factors", type=float, nargs="+", default=None,
                   help="GESL lambda = 2 K m FACTOR candidates (likewise)")
    e.add_argument("--bandwidths", type=float, nargs="+", default=None,
                   help="SVM bandwidth candidates (default: the grid's, paper 0.1 .. 10)")
    e.add_argument("--out", default=None, help="output folder (default results/DATASET)")
    e.add_argument("--seed", type=int, default=0, help="seed of the fold split (default 0)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--jobs", type=int, default=1,
                   help="worker processes for BEDL's nested beta search (default 1)")
    e.add_argument("--trees", action="store_true",
                   help="sentiment: compute on the parse trees rather than their word "
                        "sequences (equal distances, about 100x the work)")
    from .distributed import add_cli_parser

    add_cli_parser(sub)
    return p


def experiment(args) -> int:
    from .evaluation.protocol import (ExperimentConfig, ExperimentResult, full_grid,
                                      quick_grid, run_experiment, write_results)

    out = args.out or f"results/{args.dataset}"
    config = ExperimentConfig(dataset=args.dataset, folds=args.folds,
                              inner_folds=args.inner_folds, quick=args.quick, seed=args.seed,
                              max_folds=args.max_folds, metrics=tuple(args.metrics),
                              classifiers=tuple(args.classifiers),
                              train_sample=args.train_sample,
                              progress=not args.no_progress,
                              sentiment_leaves=not args.trees, n_jobs=args.jobs)
    if args.beta_factors or args.gesl_factors or args.bandwidths:
        grid = quick_grid() if args.quick else full_grid()
        if args.beta_factors:
            grid.beta_factor = list(args.beta_factors)
        if args.gesl_factors:
            grid.gesl_factor = list(args.gesl_factors)
        if args.bandwidths:
            grid.bandwidth = list(args.bandwidths)
        config.grid = grid
    result = ExperimentResult(config={})
    code = 0
    try:
        run_experiment(config, result, on_fold=lambda r: write_results(r, out))
    except KeyboardInterrupt:
        print(f"\ninterrupted: writing the {result.folds_done} complete folds", file=sys.stderr)
        code = 130
    paths = write_results(result, out)
    print()
    print(result.table())
    print()
    for note in result.notes:
        print(f"- {note}")
    print()
    for what, path in paths.items():
        print(f"{what}: {path}")
    return code


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "experiment":
        return experiment(args)
    if args.command == "pairwise":
        from .distributed import run_cli

        return run_cli(args)
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())

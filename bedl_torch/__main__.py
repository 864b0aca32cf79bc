"""Command line: ``python -m bedl_torch experiment DATASET|all [options]``, ``python -m
bedl_torch experiment export RUNS --out FOLDER``, ``python -m bedl_torch experiment render``
``python -m bedl_torch pairwise INPUT --out D.npy`` (a distance matrix written tile by tile,
also as ``torchrun --nproc_per_node=P -m bedl_torch pairwise ...``; see
:mod:`bedl_torch.distributed`) and ``python -m bedl_torch neighbors INPUT --k K | --radius R
--out NN.npz`` (exact k-NN or range search without the whole matrix, also under torchrun).

``experiment`` runs the paper's cross-validation protocol on one data set, or on all six one
after another with ``all`` (see :mod:`bedl_torch.evaluation.protocol`), prints a Markdown table
shaped like the paper's (rows: classifiers and the metric-learning runtime; columns: initial,
GESL, BEDL pseudo / exact; test error in % as mean +- std over the folds) and writes
``OUT/results.json`` (one record per data set, classifier, metric and fold, rewritten after
every fold, with the commit, machine and wall-clock time of each session) and
``OUT/embedding.png`` (PCA of the learned BEDL embedding of the last fold). A rerun continues
the folds already in ``OUT/results.json``; Ctrl-C stops after writing the complete folds.
``export`` turns runs' results.json files into compact per-data-set JSON files, ``render``
writes the paper table (Markdown) from those or from runs' folders.
"""
from __future__ import annotations

import argparse
import os
import sys

#: ``experiment`` words that are commands rather than data sets
EXPERIMENT_COMMANDS = ("export", "render")


def _parser() -> argparse.ArgumentParser:
    from .evaluation.protocol import CLASSIFIERS, METRICS, PAPER_FOLDS

    p = argparse.ArgumentParser(prog="python -m bedl_torch",
                                description="bedl_torch command line")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser(
        "experiment", help="run the paper's cross-validation on one data set or all",
        description="Cross-validation of initial / GESL / BEDL distances with KNN, MGLVQ, SVM "
                    "and goodness classifiers (the paper's table). A rerun into the same "
                    "--out continues the complete folds found there. Also: `experiment export "
                    "RUNS --out FOLDER` (compact results) and `experiment render` (the "
                    "Markdown table); see their --help.")
    e.add_argument("dataset", choices=sorted(PAPER_FOLDS) + ["all"], type=str.lower,
                   help="a data set, or all (the six one after another into OUT/DATASET)")
    e.add_argument("--datasets", nargs="+", choices=list(PAPER_FOLDS), type=str.lower,
                   default=None, help="with all: only these data sets (default: all six)")
    e.add_argument("--folds", type=int, default=None,
                   help="outer folds (default: the paper's: "
                        + ", ".join(f"{k} {v}" for k, v in PAPER_FOLDS.items()) + ")")
    e.add_argument("--inner-folds", type=int, default=5, help="nested search folds (default 5)")
    e.add_argument("--quick", action="store_true",
                   help="small hyper-parameter grid and short BEDL runs (smoke test)")
    e.add_argument("--max-folds", type=int, default=None,
                   help="stop after this many outer folds (a later run can continue)")
    e.add_argument("--max-items", type=int, default=None,
                   help="a stratified subsample of about this many items of each data set "
                        "(smoke tests; at least --folds per class)")
    e.add_argument("--metrics", nargs="+", choices=METRICS, default=list(METRICS))
    e.add_argument("--classifiers", nargs="+", choices=CLASSIFIERS, default=list(CLASSIFIERS))
    e.add_argument("--train-sample", type=int, default=None,
                   help="train on a random sample of this many points per training fold "
                        "(default: 300 for sentiment, as in the paper; else all; 0: the whole "
                        "training fold)")
    e.add_argument("--prototype-candidates", type=int, default=None, metavar="M",
                   help="BEDL's median GLVQ chooses among at most M candidates per class "
                        "(m x C distances per round instead of m x m; for large training "
                        "folds, e.g. sentiment with --train-sample 0)")
    e.add_argument("--beta-factors", type=float, nargs="+", default=None,
                   help="BEDL beta = 2 K m FACTOR candidates (default: the grid's; one value "
                        "skips the nested search)")
    e.add_argument("--gesl-factors", type=float, nargs="+", default=None,
                   help="GESL lambda = 2 K m FACTOR candidates (likewise)")
    e.add_argument("--bandwidths", type=float, nargs="+", default=None,
                   help="SVM bandwidth candidates (default: the grid's, paper 0.1 .. 10)")
    e.add_argument("--out", default=None,
                   help="output folder (default results/DATASET; with all: results, each "
                        "data set in OUT/DATASET)")
    e.add_argument("--restart", action="store_true",
                   help="replace results found in --out instead of continuing them (needed "
                        "when their configuration differs)")
    e.add_argument("--seed", type=int, default=0, help="seed of the fold split (default 0)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--jobs", type=int, default=1,
                   help="worker processes for BEDL's nested beta search (default 1)")
    e.add_argument("--native-paths", action="store_true",
                   help="run torch, MKL, OpenBLAS and numpy on the instruction-set paths each "
                        "picks for this processor, instead of holding them to their AVX2 paths "
                        "(the default where the processor has AVX2: the same records on AMD and "
                        "Intel, with or without AVX-512; see docs/experiments.md)")
    e.add_argument("--trees", action="store_true",
                   help="sentiment: compute on the parse trees rather than their word "
                        "sequences (equal distances, about 100x the work)")
    from .distributed.cli import add_cli_parser

    add_cli_parser(sub)
    return p


def _export_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bedl_torch experiment export",
        description="Write OUT/DATASET.json, the compact results (configuration, environment, "
                    "per-fold records) of every RUNS/DATASET/results.json (a meta.txt beside "
                    "it stands in for the session record where the results have none).")
    p.add_argument("runs", help="folder of the runs (as `experiment all --out RUNS` writes)")
    p.add_argument("--out", default="benchmarks/results",
                   help="folder of the compact files (default benchmarks/results)")
    return p


def _render_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bedl_torch experiment render",
        description="Write the paper table (Markdown) from compact results (RESULTS/DATASET."
                    "json) or runs' folders (RESULTS/DATASET/results.json): bedl_torch's "
                    "errors beside the paper's, the cells beyond the paper's std, and the "
                    "explanations of the notes file.")
    p.add_argument("--results", default="benchmarks/results",
                   help="folder of the results (default benchmarks/results)")
    p.add_argument("--out", default="benchmarks/paper_table.md",
                   help="Markdown file written (default benchmarks/paper_table.md; - prints)")
    p.add_argument("--notes", default=None,
                   help="hand-written explanations, one `## Dataset` section each (default "
                        "benchmarks/paper_notes.md when it exists)")
    return p


def _config(args, dataset):
    from .evaluation.protocol import ExperimentConfig, full_grid, quick_grid

    config = ExperimentConfig(dataset=dataset, folds=args.folds,
                              inner_folds=args.inner_folds, quick=args.quick, seed=args.seed,
                              max_folds=args.max_folds, metrics=tuple(args.metrics),
                              classifiers=tuple(args.classifiers),
                              train_sample=args.train_sample,
                              progress=not args.no_progress,
                              sentiment_leaves=not args.trees, n_jobs=args.jobs,
                              max_items=args.max_items)
    if args.prototype_candidates is not None:
        from .evaluation.protocol import QUICK_BEDL_OPTIONS

        config.bedl_options = dict(QUICK_BEDL_OPTIONS if args.quick else {},
                                   prototype_candidates=int(args.prototype_candidates))
    if args.beta_factors or args.gesl_factors or args.bandwidths:
        grid = quick_grid() if args.quick else full_grid()
        if args.beta_factors:
            grid.beta_factor = list(args.beta_factors)
        if args.gesl_factors:
            grid.gesl_factor = list(args.gesl_factors)
        if args.bandwidths:
            grid.bandwidth = list(args.bandwidths)
        config.grid = grid
    return config


def experiment(args, argv) -> int:
    from .evaluation.protocol import PAPER_FOLDS
    from .evaluation.protocol.runs import ConfigMismatchError, ResultsFileError, run_dataset

    command = "python -m bedl_torch " + " ".join(argv)
    if args.dataset == "all":
        datasets = [d for d in PAPER_FOLDS if d in (args.datasets or PAPER_FOLDS)]
        out_of = {d: os.path.join(args.out or "results", d) for d in datasets}
    else:
        if args.datasets:
            print("error: --datasets goes with `experiment all`", file=sys.stderr)
            return 2
        datasets = [args.dataset]
        out_of = {args.dataset: args.out or f"results/{args.dataset}"}
    configs = {d: _config(args, d) for d in datasets}
    try:
        for d in datasets:  # bad options fail before any data set runs
            configs[d].resolved()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed_cells = 0
    for i, d in enumerate(datasets):
        if len(datasets) > 1:
            print(f"== [{i + 1}/{len(datasets)}] {d} -> {out_of[d]}", file=sys.stderr,
                  flush=True)
        try:
            result, interrupted = run_dataset(configs[d], out_of[d], restart=args.restart,
                                              command=command)
        except (ConfigMismatchError, ResultsFileError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print()
        print(result.table())
        print()
        for note in result.notes:
            print(f"- {note}")
        print()
        print(f"results: {os.path.join(out_of[d], 'results.json')} ({result.folds_done} of "
              f"{result.config['folds']} folds)")
        failed = sum(1 for r in result.records if r.get("failed"))
        if failed:
            print(f"error: {failed} cells of {d} failed (the notes above say why); exit status 1",
                  file=sys.stderr)
            failed_cells += failed
        if interrupted:
            print(f"\ninterrupted: wrote the {result.folds_done} complete folds of {d}; the "
                  "same command continues", file=sys.stderr)
            return 130
    if args.dataset == "all":
        from .evaluation.protocol.export import load_runs
        from .evaluation.protocol.render import render_paper_table

        root = args.out or "results"
        page = render_paper_table(load_runs(root), command=f"python -m bedl_torch experiment "
                                  f"render --results {root} --out {root}/paper_table.md")
        with open(os.path.join(root, "paper_table.md"), "w") as f:
            f.write(page)
        print(f"paper table: {os.path.join(root, 'paper_table.md')}")
    return 1 if failed_cells else 0


def export(argv) -> int:
    from .evaluation.protocol.export import export_runs

    args = _export_parser().parse_args(argv)
    try:
        written = export_runs(args.runs, args.out)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for ds, path in written.items():
        print(f"{ds}: {path}")
    return 0


def render(argv) -> int:
    from .evaluation.protocol.export import load_runs
    from .evaluation.protocol.render import render_paper_table

    args = _render_parser().parse_args(argv)
    notes_path = args.notes
    if notes_path is None and os.path.isfile("benchmarks/paper_notes.md"):
        notes_path = "benchmarks/paper_notes.md"
    try:
        runs = load_runs(args.results)
        notes = open(notes_path).read() if notes_path else None
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not runs:
        print(f"warning: no results in {args.results} (DATASET.json or DATASET/results.json)",
              file=sys.stderr)
    command = f"python -m bedl_torch experiment render --results {args.results} --out {args.out}"
    if args.notes:
        command += f" --notes {args.notes}"
    page = render_paper_table(runs, notes, command=command,
                              notes_name=f"`{notes_path}`" if notes_path else "a notes file "
                              "(--notes)")
    if args.out == "-":
        sys.stdout.write(page)
    else:
        with open(args.out, "w") as f:
            f.write(page)
        print(f"paper table: {args.out} ({', '.join(runs) or 'no results'})")
    return 0


def main(argv=None, reexec: bool = False) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``). With ``reexec`` (the
    ``python -m bedl_torch`` entry point), ``experiment`` first re-executes the process on the
    numerical libraries' AVX2 paths unless ``--native-paths`` is given; called in a process
    that is to stay (tests), it runs on the paths that process has."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "experiment" and argv[1] in EXPERIMENT_COMMANDS:
        return export(argv[2:]) if argv[1] == "export" else render(argv[2:])
    args = _parser().parse_args(argv)
    if args.command == "experiment":
        if reexec and not args.native_paths:
            from .evaluation.protocol.numerics import reexec_on_avx2_paths

            reexec_on_avx2_paths(argv)  # returns where it runs on them already
        return experiment(args, argv)
    if args.command in ("pairwise", "neighbors"):
        from .distributed.cli import run_cli

        return run_cli(args)
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main(reexec=True))

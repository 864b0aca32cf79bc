"""Studies of BEDL's settings on the protocol's outer folds, each fit the protocol's final
refit (same training fold, Sentiment sample and cosine costs) with the ``K`` that the
protocol chose in that fold (``fold_info`` of a results file).

``alignments``: pseudo mode's ``alignments="step"`` against ``"initial"``, at the fold's
chosen beta factor of BEDL (pseudo). Both are compared on what they are for: the actual
objective (GLVQ loss plus regularisers on exact distances under the learned costs, the lowest
over the fit's rounds: what BEDL returns), the test error of the fitted prototypes (median
GLVQ, as ``BEDL.predict``) and of 1-NN on the learned exact distances, and the fit time.

``beta``: the test errors of every beta factor of the grid in every fold (not a model choice:
the protocol chooses beta on validation folds), beside the factor the nested search chose, to
tell a metric that cannot help from a search that picks badly.

``goodness``: the goodness classifier (nested search of lambda, refit, test) on the initial
distances, on BEDL's learned distances, on each of them rescaled to the other's median
training distance, and on each rescaled to medians from 0.1 to 10: its similarity ``2 exp(-d) - 1``
depends on the distances' scale, so this tells a gain of the learned metric's structure from
one of its scale, and how much the scale alone costs the classifier.

``classifiers``: the protocol's four classifiers (nested search, refit, test) on the initial
distances and on BEDL's learned distances at the fold's chosen beta factor, once with the
paper's grid and once with the SVM bandwidths extended to 100 (``--mode`` picks BEDL's
training mode): whether a flagged SVM cell comes from the metric or from the bandwidth range.

Run: ``PYTHONPATH=. .venv/bin/python tools/bedl_study.py {alignments,beta} [DATASET ...]
[--results benchmarks/results] [--out study.json] [--mode pseudo|exact]``
(``{alignments,beta,classifiers,goodness}``). A results
directory may hold ``<dataset>.json`` (the committed compact files) or
``<dataset>/results.json`` (a run's raw output). Prints a markdown summary.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bedl_torch.evaluation.classifiers import KNNClassifier  # noqa: E402
from bedl_torch.evaluation.protocol.config import ExperimentConfig, full_grid  # noqa: E402
from bedl_torch.evaluation.protocol.data import (SentimentCosts, leaf_sequence,  # noqa: E402
                                                 load_dataset)
from bedl_torch.evaluation.protocol.folds import (as_numpy, classify, error,  # noqa: E402
                                                  fold_seed, make_bedl, outer_folds)
from bedl_torch.ops import pairwise_distances  # noqa: E402

DATASETS = ["strings", "minipalindrome", "sorting", "cystic", "leukemia", "sentiment"]
SETTINGS = ("step", "initial")


def read_results(results_dir: str, dataset: str) -> dict:
    """A data set's results (compact or raw)."""
    for path in (os.path.join(results_dir, f"{dataset}.json"),
                 os.path.join(results_dir, dataset, "results.json")):
        if os.path.exists(path):
            with open(path) as fh:
                return json.load(fh)
    raise FileNotFoundError(f"no results for {dataset} in {results_dir}")


def fit_one(X, y, tr, te, K, factor, options, senti, seed, mode="pseudo",
            distances=False) -> dict:
    """One fit of the protocol's final refit with extra BEDL ``options``; its objective, test
    errors, rounds and seconds (and, with ``distances``, the learned training and test
    distances under "D_tr", "D_te")."""
    cost = None
    X_tr, X_te = [X[i] for i in tr], [X[i] for i in te]
    if senti is not None:
        cost = senti.make(X_tr, X_tr + X_te)[0]
    torch.manual_seed(seed)
    model = make_bedl(mode, K, 2 * K * len(tr) * factor, cost, {"unknown": "origin", **options})
    t0 = time.perf_counter()
    model.fit(X_tr, y[tr])
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        D_tr = as_numpy(model.pairwise_distances(X_tr))
        D_te = as_numpy(model.pairwise_distances(X_te, X_tr))
    knn = KNNClassifier(n_neighbors=1).fit(D_tr, y[tr])
    out = {"objective": float(min(model.actual_loss_history_)),
           "mglvq_error": error(model.predict(X_te), y[te]),
           "knn1_error": error(knn.predict(D_te), y[te]),
           "rounds": int(model.n_rounds_), "fit_s": seconds}
    if distances:
        out.update(D_tr=D_tr, D_te=D_te)
    return out


def fold_settings(dataset: str, results_dir: str, max_folds=None):
    """``(X, y, senti, [(fold, tr, te, fold_info), ...], results)`` of the folds a results
    file holds, drawn as the protocol draws them."""
    res = read_results(results_dir, dataset)
    c = res["config"]
    cfg = ExperimentConfig(dataset=dataset, folds=c["folds"], seed=c["seed"],
                           train_sample=c["train_sample"],
                           sentiment_leaves=c.get("sentiment_leaves", True)).resolved()
    X, y = load_dataset(dataset)
    if dataset == "sentiment" and cfg.sentiment_leaves:
        X = [leaf_sequence(t) for t in X]
    senti = SentimentCosts() if dataset == "sentiment" else None
    info = {i["fold"]: i for i in res["fold_info"]}
    folds = [(fold, tr, te, info[fold]) for fold, tr, te in outer_folds(cfg, X, y)
             if fold in info and "K" in info[fold]
             and (max_folds is None or fold < max_folds)]
    return X, y, senti, folds, res


def study_alignments(dataset: str, results_dir: str, max_folds=None, **_) -> dict:
    X, y, senti, folds, res = fold_settings(dataset, results_dir, max_folds)
    rows = []
    for fold, tr, te, fi in folds:
        if "bedl_pseudo" not in fi:
            continue
        K, factor = int(fi["K"]), float(fi["bedl_pseudo"]["factor"])
        row = {"fold": fold, "K": K, "factor": factor}
        for setting in SETTINGS:
            row[setting] = fit_one(X, y, tr, te, K, factor, {"alignments": setting}, senti,
                                   fold_seed(res["config"]["seed"], fold))
        rows.append(row)
        print(f"{dataset} fold {fold}: " + ", ".join(
            f"{s} obj {row[s]['objective']:.4g} mglvq {row[s]['mglvq_error']:.3f} "
            f"1nn {row[s]['knn1_error']:.3f} {row[s]['fit_s']:.1f}s" for s in SETTINGS),
            flush=True)
    return {"dataset": dataset, "folds": rows}


def study_beta(dataset: str, results_dir: str, max_folds=None, mode="pseudo") -> dict:
    X, y, senti, folds, res = fold_settings(dataset, results_dir, max_folds)
    factors = res["config"]["grid"]["beta_factor"]
    metric = f"bedl_{mode}"
    rows = []
    for fold, tr, te, fi in folds:
        K = int(fi["K"])
        row = {"fold": fold, "K": K, "chosen": fi.get(metric, {}).get("factor"), "fits": {}}
        for factor in factors:
            row["fits"][str(factor)] = fit_one(X, y, tr, te, K, factor, {}, senti,
                                               fold_seed(res["config"]["seed"], fold),
                                               mode)
        rows.append(row)
        print(f"{dataset} fold {fold} K {K} chosen {row['chosen']}: " + ", ".join(
            f"{f}: mglvq {r['mglvq_error']:.3f} 1nn {r['knn1_error']:.3f}"
            for f, r in row["fits"].items()), flush=True)
    return {"dataset": dataset, "mode": mode, "factors": factors, "folds": rows}


#: the SVM bandwidths of the extended grid: the paper's 0.1 .. 10 continued to 100
EXTENDED_BANDWIDTHS = [float(v) for v in np.logspace(-1, 2, 10)]
CLASSIFIER_NAMES = ("KNN", "MGLVQ", "SVM", "goodness")


def initial_and_learned(dataset: str, results_dir: str, max_folds=None, mode="pseudo"):
    """For each fold with a BEDL ``mode`` record: ``(fold, K, factor, seed, y_tr, y_te,
    initial, learned, fit)``, the distances as ``(training, test-to-training)`` pairs and
    ``fit`` as :func:`fit_one` returns it (without the distances)."""
    X, y, senti, folds, res = fold_settings(dataset, results_dir, max_folds)
    metric = f"bedl_{mode}"
    for fold, tr, te, fi in folds:
        if metric not in fi:
            continue
        K, factor = int(fi["K"]), float(fi[metric]["factor"])
        seed = fold_seed(res["config"]["seed"], fold)
        X_tr, X_te = [X[i] for i in tr], [X[i] for i in te]
        cost0 = senti.make(X_tr, X_tr + X_te)[0] if senti is not None else None
        with torch.no_grad():
            D0 = (as_numpy(pairwise_distances(X_tr, cost=cost0)),
                  as_numpy(pairwise_distances(X_te, X_tr, cost=cost0)))
        fit = fit_one(X, y, tr, te, K, factor, {}, senti, seed, mode, distances=True)
        D1 = (fit.pop("D_tr"), fit.pop("D_te"))
        yield fold, K, factor, seed, y[tr], y[te], D0, D1, fit


def study_classifiers(dataset: str, results_dir: str, max_folds=None, mode="pseudo") -> dict:
    inner = int(read_results(results_dir, dataset)["config"]["inner_folds"])
    grids = {"paper": full_grid(),
             "extended": dataclasses.replace(full_grid(), bandwidth=EXTENDED_BANDWIDTHS)}
    metric = f"bedl_{mode}"
    rows = []
    for fold, K, factor, seed, y_tr, y_te, D0, D1, fit in initial_and_learned(
            dataset, results_dir, max_folds, mode):
        row = {"fold": fold, "K": K, "factor": factor, "fit": fit}
        for name, (D_tr, D_te) in (("initial", D0), (metric, D1)):
            for g, grid in grids.items():
                for clf in CLASSIFIER_NAMES:
                    if g == "extended" and clf != "SVM":
                        continue
                    err, value, _ = classify(clf, grid, D_tr, y_tr, D_te, y_te, inner, seed)
                    row[f"{name}/{clf}/{g}"] = {"error": err, "value": value}
        rows.append(row)
        print(f"{dataset} fold {fold}: " + ", ".join(
            f"{k} {v['error']:.3f} ({v['value']:g})" for k, v in row.items()
            if isinstance(v, dict) and "error" in v), flush=True)
    return {"dataset": dataset, "mode": mode, "folds": rows}


#: the median training distances the goodness study rescales each kind of distances to
GOODNESS_MEDIANS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: the goodness study's variants: (name, distances, scaled to: the median of the other
#: distances, or a median training distance of GOODNESS_MEDIANS)
GOODNESS_VARIANTS = (("initial", "initial", None), ("bedl", "bedl", None),
                     ("initial_at_bedl_scale", "initial", "bedl"),
                     ("bedl_at_initial_scale", "bedl", "initial")) + tuple(
    (f"{source}_at_median_{median:g}", source, median)
    for source in ("initial", "bedl") for median in GOODNESS_MEDIANS)


def study_goodness(dataset: str, results_dir: str, max_folds=None, mode="pseudo") -> dict:
    inner = int(read_results(results_dir, dataset)["config"]["inner_folds"])
    grid = full_grid()
    rows = []
    for fold, K, factor, seed, y_tr, y_te, D0, D1, _ in initial_and_learned(
            dataset, results_dir, max_folds, mode):
        D = {"initial": D0, "bedl": D1}
        off_diagonal = ~np.eye(len(y_tr), dtype=bool)
        median = {k: float(np.median(v[0][off_diagonal])) for k, v in D.items()}
        row = {"fold": fold, "K": K, "factor": factor, "median_distance": median}
        for name, source, scale_to in GOODNESS_VARIANTS:
            target = median[scale_to] if isinstance(scale_to, str) else scale_to
            s = 1.0 if scale_to is None else target / median[source]
            err, value, _ = classify("goodness", grid, s * D[source][0], y_tr, s * D[source][1],
                                     y_te, inner, seed)
            row[name] = {"error": err, "lambda": value, "scale": s}
        rows.append(row)
        print(f"{dataset} fold {fold}: medians {median['initial']:.3g} / {median['bedl']:.3g}; "
              + ", ".join(f"{n} {row[n]['error']:.3f} (lambda {row[n]['lambda']:g})"
                          for n, _, _ in GOODNESS_VARIANTS), flush=True)
    return {"dataset": dataset, "mode": mode, "folds": rows}


def summarise_goodness(entry: dict) -> str:
    rows = entry["folds"]
    lines = [f"{entry['dataset']} ({entry['mode']} mode, {len(rows)} folds): goodness test "
             "error [%] (mean over folds) and median training distance", "",
             "| distances | test error | median distance (mean over folds) |", "|---|---|---|"]
    for name, source, _ in GOODNESS_VARIANTS:
        err = 100 * np.mean([r[name]["error"] for r in rows]) if rows else float("nan")
        med = np.mean([r["median_distance"][source] * r[name]["scale"] for r in rows]) \
            if rows else float("nan")
        lines.append(f"| {name} | {err:.1f} | {med:.3g} |")
    return "\n".join(lines)


def summarise_classifiers(entry: dict) -> str:
    rows = entry["folds"]
    metric = f"bedl_{entry['mode']}"
    lines = [f"{entry['dataset']} ({len(rows)} folds): test error [%], mean over folds",
             "", "| classifier | initial | BEDL " + f"({entry['mode']}) |", "|---|---|---|"]
    for clf, g in [(c, "paper") for c in CLASSIFIER_NAMES] + [("SVM", "extended")]:
        label = clf if g == "paper" else "SVM, bandwidths to 100"
        cells = [f"{100 * np.mean([r[f'{name}/{clf}/{g}']['error'] for r in rows]):.1f}"
                 for name in ("initial", metric)] if rows else ["-", "-"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarise_beta(entry: dict) -> str:
    rows = entry["folds"]
    lines = [f"{entry['dataset']} ({entry['mode']} mode, {len(rows)} folds): test error [%] "
             "of MGLVQ (BEDL's prototypes) / 1-NN per beta factor",
             "", "| factor | " + " | ".join(str(f) for f in entry["factors"])
             + " | the nested search's choice |",
             "|---" * (len(entry["factors"]) + 2) + "|"]
    cells = []
    for f in entry["factors"]:
        fits = [r["fits"][str(f)] for r in rows]
        cells.append(f"{100 * np.mean([x['mglvq_error'] for x in fits]):.1f} / "
                     f"{100 * np.mean([x['knn1_error'] for x in fits]):.1f}")
    chosen = [r["fits"][str(r["chosen"])] for r in rows if r["chosen"] is not None]
    cells.append(f"{100 * np.mean([x['mglvq_error'] for x in chosen]):.1f} / "
                 f"{100 * np.mean([x['knn1_error'] for x in chosen]):.1f}" if chosen else "-")
    lines.append("| test error | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarise(entry: dict) -> str:
    rows = entry["folds"]
    if not rows:
        return f"| {entry['dataset']} | 0 | - | - | - | - | - |"

    def mean(setting, key, scale=1.0):
        return np.mean([r[setting][key] for r in rows]) * scale

    # equal: within 1e-6 relative (the first metric step is the same under both settings, up
    # to rounding; a fit that stops there gives the same objective)
    def differs(r, sign):
        a, b = r["initial"]["objective"], r["step"]["objective"]
        return sign * (a - b) > 1e-6 * max(abs(a), abs(b))

    lower = sum(differs(r, -1) for r in rows)
    higher = sum(differs(r, +1) for r in rows)
    cells = [entry["dataset"], str(len(rows)),
             f"{higher} / {lower} / {len(rows) - lower - higher}"]
    for key in ("mglvq_error", "knn1_error"):
        cells.append(f"{mean('step', key, 100):.1f} / {mean('initial', key, 100):.1f}")
    cells.append(f"{mean('step', 'fit_s'):.2f} / {mean('initial', 'fit_s'):.2f}")
    return "| " + " | ".join(cells) + " |"


HEADER = ("| data set | folds | initial's objective higher / lower / equal (folds) | "
          "MGLVQ test error [%] step / initial | 1-NN test error [%] step / initial | "
          "fit [s] step / initial |\n|---|---|---|---|---|---|")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", choices=["alignments", "beta", "classifiers", "goodness"])
    ap.add_argument("datasets", nargs="*", default=DATASETS)
    ap.add_argument("--mode", choices=["pseudo", "exact"], default="pseudo",
                    help="BEDL's training mode")
    ap.add_argument("--results", default="benchmarks/results")
    ap.add_argument("--out", default=None, help="write the per-fold records as JSON here")
    ap.add_argument("--max-folds", type=int, default=None)
    ap.add_argument("--summarise", default=None, metavar="JSON",
                    help="only print the tables of a study's earlier --out file")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    entries = []
    if args.summarise:
        with open(args.summarise) as fh:
            entries = json.load(fh)["entries"]
    for ds in args.datasets if not args.summarise else []:
        run = {"alignments": study_alignments, "beta": study_beta,
               "classifiers": study_classifiers, "goodness": study_goodness}[args.study]
        entries.append(run(ds, args.results, args.max_folds, mode=args.mode))
        if args.out:
            with open(args.out, "w") as fh:
                json.dump({"entries": entries}, fh, indent=1)
    if args.study == "alignments":
        print(HEADER)
        for e in entries:
            print(summarise(e))
    else:
        summary = {"beta": summarise_beta, "classifiers": summarise_classifiers,
                   "goodness": summarise_goodness}[args.study]
        for e in entries:
            print(summary(e) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

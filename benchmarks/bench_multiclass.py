"""BEDL on a multi-class tree task with a rich alphabet: which package wrote a Python function,
from its syntax tree (:func:`bedl_torch.datasets.python_functions`, built from this machine's
installed sources). The initial distance against BEDL with ``loss="glvq"`` (K prototypes per
class) and ``loss="nca"``, each judged by k-NN on the learned distance.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_multiclass.py [--train 60] [--test 30]
[--candidates 20] [--configs ...] [--threads 2]``; ``--train 200 --test 100`` is the full
size (1,200 training and 600 test trees).

Data: ``python_functions(n_per_class=train + test, seed)`` over the six default packages
(numpy, scipy, sklearn, sympy, torch, networkx), labels the node types and the ``--identifiers``
most frequent identifiers (``Name:np``, ``Attribute:shape``, ...; 0: node types only), split per
class by
``--split-seed`` into ``--train`` training and ``--test`` test trees. Every configuration is
judged on the same split by k-NN (``--k``, default 1 and 5) over all training trees, on the
exact edit distance under its learned costs; the GLVQ rows add median GLVQ's own prediction
(``predict``). ``beta`` is ``--beta`` (default 0.05, BEDL's default) unless a configuration
names its own. BLAS runs on one thread (the kernels on ``--threads``). Prints a Markdown
table, the command, the CPU model and the load average.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

import bedl_torch as bt
from bedl_torch.costs import EuclideanCost
from bedl_torch.datasets import DEFAULT_PACKAGES, python_functions
from bedl_torch.labels import sorted_alphabet
from bedl_torch.learning import initial_embedding
from bedl_torch.learning.nca import knn_vote
from bench_common import cpu_model, load_average

#: name -> BEDL keyword arguments (``candidates`` is filled in from --candidates)
CONFIGS = {
    "glvq-K1": dict(loss="glvq", n_prototypes=1),
    "glvq-K3": dict(loss="glvq", n_prototypes=3),
    "glvq-K5": dict(loss="glvq", n_prototypes=5),
    "nca-pseudo": dict(loss="nca", mode="pseudo"),
    "nca-exact": dict(loss="nca", mode="exact"),
    "nca-pseudo-cand": dict(loss="nca", mode="pseudo", candidates=True),
    "nca-exact-cand": dict(loss="nca", mode="exact", candidates=True),
}
DEFAULT_CONFIGS = ["glvq-K1", "glvq-K3", "nca-pseudo", "nca-exact-cand"]


def split(y: np.ndarray, n_train: int, seed: int):
    """Per class, ``n_train`` training indices and the rest as test indices (seeded)."""
    rng = np.random.default_rng(seed)
    tr, te = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        tr.extend(idx[:n_train].tolist())
        te.extend(idx[n_train:].tolist())
    return np.array(sorted(tr)), np.array(sorted(te))


def knn_errors(D_test_train: np.ndarray, y_train: np.ndarray, y_test: np.ndarray, ks) -> dict:
    n_classes = int(max(y_train.max(), y_test.max())) + 1
    return {k: 100.0 * float(np.mean(knn_vote(D_test_train, y_train, k, n_classes) != y_test))
            for k in ks}


def parse_config(name: str, candidates: int, beta: float) -> dict:
    """A configuration by name; ``NAME:beta=0.5,nca_scale=2`` overrides parameters
    (``validation_fraction=0.2``: the recipe's check, see ``docs/knn-recipe.md``)."""
    base, _, extra = name.partition(":")
    kw = dict(CONFIGS[base])
    kw.setdefault("beta", beta)
    for item in filter(None, extra.split(",")):
        key, _, value = item.partition("=")
        kw[key] = type(kw.get(key, 0.0))(value) if key in kw else float(value)
    if kw.pop("candidates", False) or kw.get("loss") == "glvq":
        kw["prototype_candidates"] = candidates
    return kw


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=60, help="training trees per class")
    ap.add_argument("--test", type=int, default=30, help="test trees per class")
    ap.add_argument("--candidates", type=int, default=20, help="prototype candidates per class")
    ap.add_argument("--configs", nargs="*", default=DEFAULT_CONFIGS,
                    help=f"of {sorted(CONFIGS)}, optionally NAME:key=value,...")
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--k", type=int, nargs="*", default=[1, 5])
    ap.add_argument("--max-rounds", type=int, default=5)
    ap.add_argument("--identifiers", type=int, default=150,
                    help="python_functions' max_identifiers (0: node types only)")
    ap.add_argument("--seed", type=int, default=0, help="python_functions' seed")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    # one BLAS thread: the metric step's SVDs (log-det) of a 200 x 200 embedding run ~20x
    # slower with several BLAS threads on busy cores; the kernels use torch's threads
    threadpool_limits(1, user_api="blas")
    load0 = load_average()
    t0 = time.perf_counter()
    X, y = python_functions(n_per_class=args.train + args.test, seed=args.seed,
                            include_identifiers=args.identifiers > 0,
                            max_identifiers=args.identifiers or None)
    t_data = time.perf_counter() - t0
    tr, te = split(y, args.train, args.split_seed)
    X_tr, y_tr = [X[i] for i in tr], y[tr]
    X_te, y_te = [X[i] for i in te], y[te]
    alphabet = sorted_alphabet(X_tr)
    n_unseen = len(set(sorted_alphabet(X_te)) - set(alphabet))

    rows = []
    initial = EuclideanCost(alphabet, embedding=initial_embedding(len(alphabet)))
    t0 = time.perf_counter()
    with torch.no_grad():
        D0 = bt.pairwise_distances(X_te, X_tr, initial, unknown="gap").numpy()
    rows.append(("initial (unit costs)", "-", knn_errors(D0, y_tr, y_te, args.k), None, 0.0,
                 time.perf_counter() - t0, ""))
    for name in args.configs:
        kw = parse_config(name, args.candidates, args.beta)
        model = bt.BEDL(max_rounds=args.max_rounds, unknown="origin", **kw)
        t0 = time.perf_counter()
        model.fit(X_tr, y_tr)
        fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        D = model.pairwise_distances(X_te, X_tr)
        own = None
        if model.loss == "glvq":
            own = 100.0 * float(np.mean(model.predict(X_te) != y_te))
        info = f"{model.n_rounds_} rounds, {sum(model.n_evals_)} evals, {model.stop_reason_}"
        if hasattr(model, "validation_errors_"):
            e0, e1 = model.validation_errors_
            info += (f"; held-out {model.n_neighbors}-NN {e0:.1f} -> {e1:.1f} %"
                     + (", kept the initial costs" if model.kept_initial_ else ""))
        rows.append((name, f"{kw['beta']:g}", knn_errors(D, y_tr, y_te, args.k), own, fit,
                     time.perf_counter() - t0, info))
        print(f"... {name} done: {rows[-1]}", file=sys.stderr, flush=True)

    ks = args.k
    print(f"{len(X_tr)} training and {len(X_te)} test trees, {len(DEFAULT_PACKAGES)} classes "
          f"({', '.join(DEFAULT_PACKAGES)}), {len(alphabet)} labels in training "
          f"({n_unseen} more only in test), mean size "
          f"{np.mean([len(t) for t in X_tr]):.1f} nodes; data built in {t_data:.1f} s\n")
    head = " | ".join(f"{k}-NN test error %" for k in ks)
    print(f"| distance | beta | {head} | prototypes' test error % | fit s | test matrix s | fit |")
    print("|---|---|" + "---|" * len(ks) + "---|---|---|---|")
    for name, beta, errs, own, fit, tm, info in rows:
        cells = " | ".join(f"{errs[k]:.1f}" for k in ks)
        own_s = "-" if own is None else f"{own:.1f}"
        print(f"| {name} | {beta} | {cells} | {own_s} | {fit:.1f} | {tm:.1f} | {info} |")
    print("\ncommand: `PYTHONPATH=. .venv/bin/python benchmarks/bench_multiclass.py "
          + " ".join(sys.argv[1:]) + "`")
    print(f"CPU: {cpu_model()}; load average before: {load0}, after: {load_average()}; "
          f"torch threads {args.threads}")


if __name__ == "__main__":
    main()

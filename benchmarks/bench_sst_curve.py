"""Learning curves on the binary SST: BEDL on 300, 1,000, 3,000 and all 6,920 training sentences,
judged on the SST test split by k-NN and an SVM on the learned distances and by BEDL's own
prototypes (MGLVQ), beside the same classifiers on the initial distances.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/bench_sst_curve.py [--sizes 300 1000 3000 6920]
[--candidates 50] [--beta-factor 1e-5] [--threads 2] [--loss glvq]``.

Data and costs as ``bench_sst_full.py``: the binary SST's own split as word sequences, the
protocol's cosine costs over GloVe (PCA fitted on each training set's words, gap cost 1/4).
A training set of ``n`` sentences is the first ``n`` of one fixed permutation (seed 0), so the
sets are nested. BEDL: pseudo mode, ``--loss`` (GLVQ, or the neighbour objective ``"nca"``
with the candidates as references), one prototype per class, ``beta = 2 K m f``,
``prototype_candidates`` per class (all sentences for ``n = 300``, as the paper's protocol),
``max_rounds=5``.

Classifiers on the whole ``n x n`` training matrix and the ``1,821 x n`` test matrix of each
distance (initial and learned): k-NN with ``k`` chosen by leave-one-out on the training matrix
(1 to 51, odd); the SVM of :mod:`bedl_torch.evaluation.classifiers` (RBF kernel on the
distances, clip eigenvalue correction) with the bandwidth chosen among the protocol's seven
(0.1 to 10) by a 80/20 split of at most 1,000 training sentences; MGLVQ: the model's own
prototypes (for the initial distance: median GLVQ's prototypes without metric learning, as
``bench_sst_full.py``; with ``loss="nca"`` the model's own prediction is its k-NN vote over the
references). Prints a Markdown table of test errors and times, the CPU model and
the load average.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

import bedl_torch as bt
from bedl_torch.evaluation.classifiers import KNNClassifier, SVMClassifier
from bedl_torch.evaluation.protocol.config import PAPER_BANDWIDTHS
from bedl_torch.evaluation.protocol.data import SentimentCosts
from bench_common import cpu_model, load_average
from bench_sst_full import sst_split

NEIGHBOURS = tuple(range(1, 52, 2))


def loo_knn(D: np.ndarray, y: np.ndarray) -> int:
    """The k of :data:`NEIGHBOURS` with the fewest leave-one-out errors on a training matrix
    (each point's own entry set above every distance; ties: the smallest k)."""
    D_fit, D = D, D.copy()
    np.fill_diagonal(D, 2.0 * np.abs(D).max() + 1.0)
    errors = [int(np.sum(KNNClassifier(k).fit(D_fit, y).predict(D) != y)) for k in NEIGHBOURS]
    return NEIGHBOURS[int(np.argmin(errors))]


def holdout_bandwidth(D: np.ndarray, y: np.ndarray, rng) -> float:
    """The bandwidth of the protocol's grid with the fewest errors on a 20 % holdout of at most
    1,000 training sentences (ties: the smaller)."""
    idx = rng.permutation(len(y))[:1000]
    cut = int(0.8 * len(idx))
    fit, val = idx[:cut], idx[cut:]
    best, best_err = None, None
    for bw in PAPER_BANDWIDTHS:
        svm = SVMClassifier(bandwidth=bw).fit(D[np.ix_(fit, fit)], y[fit])
        err = int(np.sum(svm.predict(D[np.ix_(val, fit)]) != y[val]))
        if best_err is None or err < best_err:
            best, best_err = bw, err
    return float(best)


def judge(D_tr: np.ndarray, D_te: np.ndarray, y_tr, y_te, rng) -> dict:
    """Test errors [%] of k-NN and the SVM on one distance, with their chosen settings."""
    start = time.perf_counter()
    k = loo_knn(D_tr, y_tr)
    knn = 100.0 * float(np.mean(KNNClassifier(k).fit(D_tr, y_tr).predict(D_te) != y_te))
    bw = holdout_bandwidth(D_tr, y_tr, rng)
    svm = 100.0 * float(np.mean(SVMClassifier(bandwidth=bw).fit(D_tr, y_tr).predict(D_te) != y_te))
    return {"knn": knn, "k": k, "svm": svm, "bandwidth": bw, "classifier_s": time.perf_counter() - start}


def matrices(cost, X_tr, X_te):
    start = time.perf_counter()
    with torch.no_grad():
        D_tr = bt.pairwise_distances(X_tr, cost=cost).detach().double().numpy()
        D_te = bt.pairwise_distances(X_te, X_tr, cost=cost).detach().double().numpy()
    return D_tr, D_te, time.perf_counter() - start


def one_size(n, order, X_all, y_all, X_te, y_te, candidates, factor, loss):
    idx = np.sort(order[:n])
    X_tr, y_tr = [X_all[i] for i in idx], y_all[idx]
    cost = SentimentCosts().make(X_tr, X_tr + X_te)[0]
    K = 1
    cand = None if n <= 300 else candidates
    start = time.perf_counter()
    model = bt.BEDL(n_prototypes=K, beta=2 * K * n * factor, mode="pseudo", cost=cost, unknown="origin",
                    prototype_candidates=cand, max_rounds=5, loss=loss).fit(X_tr, y_tr)
    fit_s = time.perf_counter() - start
    initial = bt.BEDL(n_prototypes=K, cost=cost, unknown="origin", prototype_candidates=cand,
                      max_rounds=0).fit(X_tr, y_tr)
    rows = {}
    for name, c, glvq in (("initial", cost, initial), ("learned", model.cost_, model)):
        D_tr, D_te, mat_s = matrices(c, X_tr, X_te)
        r = judge(D_tr, D_te, y_tr, y_te, np.random.default_rng(0))
        r["mglvq"] = 100.0 * float(np.mean(glvq.predict(X_te) != y_te))
        r["matrix_s"] = mat_s
        rows[name] = r
    return {"n": n, "fit_s": fit_s, "rounds": model.n_rounds_, "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3000, 6920])
    ap.add_argument("--candidates", type=int, default=50, help="candidates per class (n > 300)")
    ap.add_argument("--beta-factor", type=float, default=1e-5, help="f in beta = 2 K m f")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--loss", default="glvq", choices=("glvq", "nca"), help="BEDL's loss")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load0 = load_average()
    (X_all, y_all), (X_te, y_te) = sst_split()
    order = np.random.default_rng(0).permutation(len(X_all))
    print(f"command: `PYTHONPATH=. .venv/bin/python benchmarks/bench_sst_curve.py --sizes "
          f"{' '.join(map(str, args.sizes))} --candidates {args.candidates} --beta-factor "
          f"{args.beta_factor:g} --threads {args.threads} --loss {args.loss}`  ")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores, {args.threads} thread(s); load average before "
          f"{load0}; torch {torch.__version__}; SST binary test split: {len(X_te)} sentences\n")
    print("| training sentences | distance | k-NN [%] (k) | SVM [%] (bandwidth) | MGLVQ [%] | "
          "BEDL fit [s] (rounds) | matrices [s] | classifiers [s] |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for n in args.sizes:  # (each size's rows as soon as they are known)
        res = one_size(min(n, len(X_all)), order, X_all, y_all, X_te, y_te, args.candidates,
                       args.beta_factor, args.loss)
        for name in ("initial", "learned"):
            r = res["rows"][name]
            fit = f"{res['fit_s']:.1f} ({res['rounds']})" if name == "learned" else "-"
            print(f"| {res['n']} | {name} | {r['knn']:.1f} ({r['k']}) | {r['svm']:.1f} ({r['bandwidth']:.3g}) | "
                  f"{r['mglvq']:.1f} | {fit} | {r['matrix_s']:.1f} | {r['classifier_s']:.1f} |", flush=True)
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()

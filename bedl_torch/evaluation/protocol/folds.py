"""The fold loop of the protocol: per outer fold the initial distances, GESL and BEDL with
their nested hyper-parameter searches, and the classifiers on each metric's distances."""
from __future__ import annotations

import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold

from ...learning import BEDL, MedianGLVQ
from ...ops import pairwise_distances
from ..classifiers import GoodnessClassifier, KNNClassifier, SVMClassifier
from ..gesl import GESL, PairFrequencies
from .config import TRAIN_SAMPLE, ExperimentConfig, Grid, config_differences
from .data import SentimentCosts, leaf_sequence, load_dataset
from .pool import run_tasks
from .report import ExperimentResult, Progress, embedding_of

__all__ = ["ExperimentData", "run_experiment", "outer_folds", "fold_seed", "run_fold", "classify", "fit_bedl",
           "stratified_subsample"]

#: the hyper-parameter each classifier searches
PARAM_NAME = {"KNN": "n_neighbors", "MGLVQ": "n_prototypes", "SVM": "bandwidth",
              "goodness": "lam"}


@dataclass
class ExperimentData:
    """What every fold reads: the data set and what is computed once for all folds."""

    X: list
    y: np.ndarray
    freq: Optional[PairFrequencies]  # unit-cost frequency rows of all pairs (GESL), or None
    D_unit: Optional[np.ndarray]  # unit-cost distances (the initial metric), None for Sentiment
    senti: Optional[SentimentCosts]  # Sentiment's per-fold cosine costs, else None
    progress: Progress


# --------------------------------------------------------------------------- the experiment
def run_experiment(config: ExperimentConfig, result: Optional[ExperimentResult] = None,
                   on_fold: Optional[Callable[[ExperimentResult], None]] = None) -> ExperimentResult:
    """Run the protocol. Records are appended to ``result`` as they are produced (pass your own
    ``result`` to keep the partial results when a KeyboardInterrupt stops the run; the interrupt
    is re-raised). ``on_fold(result)`` is called after each completed outer fold.

    A ``result`` that already holds complete folds (``folds_done > 0``, e.g. read back from
    results.json with :meth:`ExperimentResult.from_json`) is continued: its first
    ``folds_done`` folds are kept as they are and not recomputed (records of a fold that was
    interrupted half-way are dropped), the remaining folds run on the same split.

    Raises:
        ValueError: an invalid configuration (see :meth:`ExperimentConfig.resolved`), or a
            ``result`` to continue whose configuration computes something else (the message
            names the differing fields).
    """
    cfg = config.resolved()
    if result is None:
        result = ExperimentResult(config={})
    done = int(result.folds_done)
    if done > 0:
        diff = config_differences(result.config, cfg.to_dict())
        if diff:
            raise ValueError("cannot continue these results: their configuration differs in "
                             + "; ".join(diff))
    result.config = cfg.to_dict()
    result.records = [r for r in result.records if r["fold"] < done]
    result.fold_info = [i for i in result.fold_info if i["fold"] < done]
    kept_notes = [n for n in result.notes
                  if _fold_of_note(n) is not None and _fold_of_note(n) < done]
    result.interrupted = False
    target = min(cfg.folds, cfg.max_folds or cfg.folds)
    X, y = load_dataset(cfg.dataset)
    if cfg.max_items is not None and len(X) > cfg.max_items:
        keep = stratified_subsample(y, cfg.max_items, cfg.folds, cfg.seed)
        X, y = [X[i] for i in keep], y[keep]
    sentiment = cfg.dataset == "sentiment"
    if sentiment and cfg.sentiment_leaves:
        X = [leaf_sequence(t) for t in X]
    result.notes = _describe(cfg, X, y) + kept_notes
    if done >= target:
        return result
    progress = Progress(target, cfg.dataset, cfg.progress, done=done)
    data = _prepare(cfg, X, y, progress)

    try:
        for fold, tr, te in outer_folds(cfg, X, y):
            if fold >= target:
                break
            if fold < done:
                continue
            t0 = time.perf_counter()
            run_fold(cfg, result, fold, tr, te, data)
            for info in result.fold_info:
                if info.get("fold") == fold:
                    info["wall_s"] = time.perf_counter() - t0
            result.folds_done = fold + 1
            progress.step()
            if on_fold is not None:
                on_fold(result)
    except KeyboardInterrupt:
        result.interrupted = True
        result.notes.append(f"interrupted after {result.folds_done} complete folds")
        raise
    finally:
        progress.close()
    return result


def outer_folds(cfg: ExperimentConfig, X, y):
    """The outer folds ``(fold, train, test)`` of a resolved configuration, with the training
    sample (``cfg.train_sample``) drawn for every fold in turn from one generator, so that a
    run continued at any fold trains on the samples of a run without a break."""
    skf = StratifiedKFold(n_splits=cfg.folds, shuffle=True, random_state=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    for fold, (tr, te) in enumerate(skf.split(np.zeros(len(X)), y)):
        if cfg.train_sample and len(tr) > cfg.train_sample:
            tr = np.sort(rng.choice(tr, cfg.train_sample, replace=False))
        yield fold, tr, te


def fold_seed(seed: int, fold: int) -> int:
    """The seed of one outer fold's inner splits and fits, from the run's ``seed``."""
    return int(seed) * 1000 + int(fold)


def _fold_of_note(note: str) -> Optional[int]:
    """The fold a note is about ("fold K: ..."), else None."""
    head = note.split(":", 1)[0]
    if head.startswith("fold ") and head[5:].isdigit():
        return int(head[5:])
    return None


def stratified_subsample(y: np.ndarray, n_items: int, n_folds: int, seed: int) -> np.ndarray:
    """Sorted indices of about ``n_items`` items drawn per class in proportion to the class
    sizes, at least ``n_folds`` of each class (or all of a smaller class) so that the
    stratified split still has every class in every fold."""
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    keep = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        share = int(round(n_items * len(members) / len(y)))
        k = min(len(members), max(share, n_folds))
        keep.append(rng.choice(members, k, replace=False))
    return np.sort(np.concatenate(keep))


def _describe(cfg: ExperimentConfig, X, y) -> list:
    """The notes that say how this run computes its numbers."""
    ds = cfg.dataset
    sentiment = ds == "sentiment"
    notes = [f"{ds}: {len(X)} items, classes {np.bincount(y).tolist()}, {cfg.folds}-fold "
             f"stratified CV (seed {cfg.seed}), nested {cfg.inner_folds}-fold search, "
             f"{'quick' if cfg.quick else 'full'} grid"
             + (f", BEDL options {cfg.bedl_options}" if cfg.bedl_options else "")]
    if cfg.max_items is not None:
        notes.append(f"{ds}: a stratified subsample of {len(X)} items (max_items "
                     f"{cfg.max_items}), not the whole data set")
    if sentiment and cfg.sentiment_leaves:
        notes.append("sentiment: distances computed on each tree's word (leaf) sequence; "
                     "under these costs they equal the tree edit distances (unlabeled inner "
                     "nodes are free to delete and cost like the gap against a word), at "
                     "~1/100 of the work on the binary parse trees; BEDL's frozen co-optimal "
                     "matrices are the sequences' (ties weighted per word alignment); pass "
                     "--trees to compute on the trees")
    if sentiment:
        notes.append("sentiment: initial = cosine cost on GloVe 6B 50d vectors reduced by PCA "
                     "(95% variance, fitted per fold on the training sample's words), Omega = I; "
                     "gap and unlabeled inner nodes at the origin (word insertion/deletion "
                     f"{SentimentCosts.GAP_COST:g}, unlabeled nodes free to insert/delete and "
                     f"{SentimentCosts.GAP_COST:g} against a word, so only the leaf sequences "
                     "count); BEDL learns Omega (CosineCost); GESL not applicable (as in the "
                     "paper)")
    if cfg.train_sample:
        paper = TRAIN_SAMPLE.get(ds)
        notes.append(f"metric learners and classifiers trained on a random sample of "
                     f"{cfg.train_sample} points of each training fold"
                     + (f" (paper: {paper})" if paper else "") + ", tested on the whole test fold")
    if "gesl" in cfg.metrics:
        notes.append("GESL distances: pseudo edit distance (scripts fixed at unit costs, "
                     "Bellet et al.'s definition); GESL's K = MGLVQ's chosen K")
    if any(m.startswith("bedl") for m in cfg.metrics):
        notes.append("BEDL distances: exact edit distance under the learned costs (both "
                     "training modes); BEDL's K = MGLVQ's chosen K")
    if not sentiment:
        notes.append("labels seen only in a test fold: unit cost 1 (initial), cost-matrix "
                     "entries 0 (GESL: they occur in no training pair), the origin of the "
                     "embedding (BEDL, unknown='origin')")
    return notes


def _prepare(cfg: ExperimentConfig, X, y, progress: Progress) -> ExperimentData:
    """What all folds share: unit-cost frequency rows (GESL) and distances (initial), or
    Sentiment's cost maker; a warm-up fit when BEDL runs."""
    freq = None
    D_unit = None
    senti = None
    if cfg.dataset == "sentiment":
        senti = SentimentCosts()
    elif "gesl" in cfg.metrics:
        progress.stage("unit-cost co-optimal matrices")
        freq = PairFrequencies(X)
        D_unit = freq.reference_matrix(np.arange(len(X)))
    else:
        progress.stage("unit-cost distances")
        D_unit = as_numpy(pairwise_distances(X))
    if any(m.startswith("bedl") for m in cfg.metrics):
        progress.stage("warm-up")
        _warm_up(X, y)
    return ExperimentData(X=X, y=y, freq=freq, D_unit=D_unit, senti=senti, progress=progress)


# --------------------------------------------------------------------------- one fold
def run_fold(cfg: ExperimentConfig, result: ExperimentResult, fold: int, tr: np.ndarray,
             te: np.ndarray, data: ExperimentData) -> None:
    """One outer fold (training indices ``tr``, test indices ``te``): every metric's distances,
    every classifier's nested search, refit and test error, appended to ``result.records``.
    MGLVQ's chosen ``K`` is the metric learners' ``K``. A metric learner that fails is recorded
    as failed (``result.notes``) and the other metrics go on."""
    run = _Fold(cfg, result, fold, tr, te, data)
    data.progress.stage("initial distances")
    D_tr0, D_te0 = run.initial_distances()
    chosen = run.classify_all("initial", D_tr0, D_te0, 0.0) if "initial" in cfg.metrics else {}
    if not any(mt != "initial" for mt in cfg.metrics):
        return
    if "MGLVQ" not in chosen:
        chosen["MGLVQ"] = classify("MGLVQ", cfg.grid, D_tr0, run.y_tr, D_te0, run.y_te,
                                   cfg.inner_folds, run.seed)[1]
    K = int(chosen["MGLVQ"])
    run.info["K"] = K
    if "gesl" in cfg.metrics:
        run.gesl(K)
    for metric in ("bedl_pseudo", "bedl_exact"):
        if metric in cfg.metrics:
            run.bedl(metric, K)


class _Fold:
    """One outer fold's split, its records and its per-fold information."""

    def __init__(self, cfg, result, fold, tr, te, data: ExperimentData):
        self.cfg, self.result, self.fold, self.tr, self.te, self.data = cfg, result, fold, tr, te, data
        self.y_tr, self.y_te = data.y[tr], data.y[te]
        self.X_tr = [data.X[i] for i in tr]
        self.X_te = [data.X[i] for i in te]
        self.m = len(tr)
        self.seed = fold_seed(cfg.seed, fold)
        self.info = {"fold": fold, "n_train": int(self.m), "n_test": int(len(te))}
        result.fold_info.append(self.info)

    def record(self, clf, metric, err, value, runtime, extra=None):
        rec = {"dataset": self.cfg.dataset, "classifier": clf, "metric": metric,
               "fold": self.fold, "error": err, "runtime_s": runtime, "param": PARAM_NAME[clf],
               "value": value, "n_train": int(self.m), "n_test": int(len(self.te))}
        if extra:
            rec.update(extra)
        self.result.records.append(rec)

    def classify_all(self, metric, D_tr, D_te, runtime, extra=None) -> dict:
        """Every classifier on one metric's distances; returns the chosen hyper-parameters. A
        classifier that fails is recorded as failed and the others go on (on the initial
        distances MGLVQ's failure stops the fold: the metric learners need its K)."""
        chosen = {}
        for clf in self.cfg.classifiers:
            self.data.progress.stage(f"{metric}: {clf}")
            try:
                err, value, _ = classify(clf, self.cfg.grid, D_tr, self.y_tr, D_te, self.y_te,
                                         self.cfg.inner_folds, self.seed)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                if metric == "initial" and clf == "MGLVQ" and len(self.cfg.metrics) > 1:
                    raise
                record_failure(self.result, self.cfg, metric, self.fold, exc,
                               classifiers=(clf,))
                continue
            chosen[clf] = value
            self.record(clf, metric, err, value, runtime, extra)
        return chosen

    def initial_distances(self):
        """Training and test-to-training distances of the initial metric."""
        data = self.data
        if data.senti is not None:
            cost0, sinfo = data.senti.make(self.X_tr, self.X_tr + self.X_te)
            self.info.update(sinfo)
            with torch.no_grad():
                return (as_numpy(pairwise_distances(self.X_tr, cost=cost0)),
                        as_numpy(pairwise_distances(self.X_te, self.X_tr, cost=cost0)))
        return data.D_unit[np.ix_(self.tr, self.tr)], data.D_unit[np.ix_(self.te, self.tr)]

    def gesl(self, K: int) -> None:
        """GESL: ``lam = 2 K m f``, ``f`` by the nested search (MGLVQ(K) validation error on
        the learned pseudo distances), refit on the training fold, classifiers."""
        cfg, freq, y, tr, te, m = self.cfg, self.data.freq, self.data.y, self.tr, self.te, self.m
        self.data.progress.stage("GESL")
        try:
            def gesl_val_error(factor):
                errs = []
                for a, b in inner_splits(self.y_tr, cfg.inner_folds, self.seed):
                    ia, ib = tr[a], tr[b]
                    g = GESL(n_neighbors=K, lam=2 * K * len(a) * factor)
                    g.fit_frequencies(freq, ia, y[ia])
                    Da = freq.pseudo_matrix(ia, ia, g.C_)
                    Db = freq.pseudo_matrix(ib, ia, g.C_)
                    clf = MedianGLVQ(n_prototypes=K).fit(Da, y[ia])
                    errs.append(error_fraction(clf.predict(Db), y[ib]))
                return mean_error(errs)

            factors = list(cfg.grid.gesl_factor)
            t0 = time.perf_counter()
            factor = select(factors, gesl_val_error)[0] if len(factors) > 1 else factors[0]
            search_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            g = GESL(n_neighbors=K, lam=2 * K * m * factor).fit_frequencies(freq, tr, self.y_tr)
            runtime = time.perf_counter() - t0
            D_tr = freq.pseudo_matrix(tr, tr, g.C_)
            D_te = freq.pseudo_matrix(te, tr, g.C_)
            self.info["gesl"] = {"factor": factor, "lam": 2 * K * m * factor, "eta": g.eta_,
                                 "qp_gap": g.info_["gap"], "objective": g.info_["objective"],
                                 "search_s": search_s}
            self.classify_all("gesl", D_tr, D_te, runtime, {"metric_param": factor})
        except Exception as exc:  # keep the other metrics going; say what failed
            record_failure(self.result, cfg, "gesl", self.fold, exc)

    def bedl(self, metric: str, K: int) -> None:
        """BEDL in one mode: nested search of beta, timed refit, classifiers on the exact
        distances under the learned costs."""
        mode = metric.split("_")[1]
        progress = self.data.progress
        progress.stage(f"BEDL ({mode})")
        try:
            t0 = time.perf_counter()
            model, factor, runtime = fit_bedl(self.cfg, self.data, mode, K, self.tr, self.te,
                                              self.seed)
            search_s = time.perf_counter() - t0 - runtime

            progress.stage(f"BEDL ({mode}) distances")
            with torch.no_grad():
                D_tr = as_numpy(model.pairwise_distances(self.X_tr))
                D_te = as_numpy(model.pairwise_distances(self.X_te, self.X_tr))
            self.info[metric] = {"factor": factor, "beta": 2 * K * self.m * factor,
                                 "search_s": search_s,
                                 "test_error_own": error(model.predict(self.X_te), self.y_te)}
            self.classify_all(metric, D_tr, D_te, runtime, {"metric_param": factor})
            self.result.embedding = embedding_of(model, metric, self.fold) or self.result.embedding
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            record_failure(self.result, self.cfg, metric, self.fold, exc)


def record_failure(result: ExperimentResult, cfg: ExperimentConfig, metric: str, fold: int,
                   exc: Exception, classifiers=None) -> None:
    """Warn on stderr (with the traceback), note the failure and record the error of each of
    ``classifiers`` (default: those without a record yet) for this metric and fold as
    missing."""
    what = metric if classifiers is None else f"{metric} {'/'.join(classifiers)}"
    msg = f"fold {fold}: {what} failed: {type(exc).__name__}: {exc}"
    print("warning: " + msg + "\n" + traceback.format_exc(), file=sys.stderr)
    result.notes.append(msg)
    if classifiers is None:
        done = {r["classifier"] for r in result.records
                if r["metric"] == metric and r["fold"] == fold}
        classifiers = [c for c in cfg.classifiers if c not in done]
    for clf in classifiers:
        result.records.append({"dataset": cfg.dataset, "classifier": clf, "metric": metric,
                               "fold": fold, "error": None, "runtime_s": None,
                               "failed": f"{type(exc).__name__}: {exc}"})


# --------------------------------------------------------------------------- classifiers
def inner_splits(y, n_splits, seed) -> list:
    """Stratified ``(train, validation)`` index splits of the nested search: ``n_splits`` or
    fewer where a class is smaller; none where a class has a single point."""
    y = np.asarray(y)
    counts = np.unique(y, return_counts=True)[1]
    k = int(min(n_splits, counts.min()))
    if k < 2:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        return list(skf.split(np.zeros(len(y)), y))


def make_classifier(name: str, value):
    """A classifier on precomputed distances with its hyper-parameter ``value``."""
    if name == "KNN":
        return KNNClassifier(n_neighbors=int(value))
    if name == "MGLVQ":
        return MedianGLVQ(n_prototypes=int(value))
    if name == "SVM":
        return SVMClassifier(bandwidth=float(value))
    if name == "goodness":
        return GoodnessClassifier(lam=float(value))
    raise ValueError(name)


def classifier_grid(name: str, grid: Grid) -> list:
    """A classifier's hyper-parameter candidates."""
    return {"KNN": grid.n_neighbors, "MGLVQ": grid.n_prototypes, "SVM": grid.bandwidth,
            "goodness": grid.goodness_lam}[name]


def select(candidates, evaluate):
    """Candidate with the smallest mean validation error, the first on ties, and all scores
    (as floats). ``evaluate`` gives exact errors (:func:`mean_error`), so candidates with the
    same error tie on every processor, however a floating-point mean of their folds' errors
    would round."""
    scores = [evaluate(c) for c in candidates]
    best = min(range(len(scores)), key=scores.__getitem__)  # min keeps the first of equals
    return candidates[best], [float(s) for s in scores]


def error(pred, y) -> float:
    """Fraction of wrong predictions."""
    return float(np.mean(np.asarray(pred) != np.asarray(y)))


def error_fraction(pred, y) -> Fraction:
    """Wrong predictions over all predictions, exactly."""
    pred, y = np.asarray(pred), np.asarray(y)
    return Fraction(int(np.count_nonzero(pred != y)), max(1, len(y)))


def mean_error(errors: Sequence[Fraction]) -> Fraction:
    """The mean of the validation folds' errors, exactly (0 without folds)."""
    return sum(errors, Fraction(0)) / len(errors) if errors else Fraction(0)


def classify(name, grid, D_tr, y_tr, D_te, y_te, inner, seed):
    """Nested search on ``D_tr``, refit, test. Returns (error, chosen value, classifier
    seconds)."""
    t0 = time.perf_counter()
    cands = list(classifier_grid(name, grid))
    if len(cands) > 1:
        splits = inner_splits(y_tr, inner, seed)

        def evaluate(value):
            errs = []
            for a, b in splits:
                clf = make_classifier(name, value).fit(D_tr[np.ix_(a, a)], y_tr[a])
                errs.append(error_fraction(clf.predict(D_tr[np.ix_(b, a)]), y_tr[b]))
            return mean_error(errs)

        value, _ = select(cands, evaluate)
    else:
        value = cands[0]
    clf = make_classifier(name, value).fit(D_tr, y_tr)
    err = error(clf.predict(D_te), y_te)
    return err, value, time.perf_counter() - t0


def as_numpy(D) -> np.ndarray:
    """A distance matrix (tensor or array) as a float64 numpy array."""
    if hasattr(D, "detach"):
        D = D.detach().cpu().double().numpy()
    return np.asarray(D, dtype=np.float64)


# --------------------------------------------------------------------------- BEDL
def make_bedl(mode, K, beta, cost_factory, options) -> BEDL:
    """A BEDL estimator with ``K`` prototypes per class, ``beta`` and the run's options."""
    kwargs = dict(n_prototypes=int(K), beta=float(beta), mode=mode)
    kwargs.update(options)
    if cost_factory is not None:
        kwargs["cost"] = cost_factory
    return BEDL(**kwargs)


def _warm_up(X, y):
    """One tiny untimed BEDL fit per mode, so that one-off start-up costs (lazy imports, first
    kernel calls) do not land in the first timed fold."""
    idx = np.concatenate([np.flatnonzero(y == c)[:2] for c in np.unique(y)])
    for mode in ("pseudo", "exact"):
        try:
            make_bedl(mode, 1, 0.0, None, {"max_rounds": 1, "max_eval": 2,
                                          "unknown": "origin"}).fit([X[i] for i in idx], y[idx])
        except Exception:  # noqa: BLE001 - the real fit will report the problem
            pass


def fit_bedl(cfg: ExperimentConfig, data: ExperimentData, mode: str, K: int, tr, te, seed):
    """Nested search of beta (on ``cfg.n_jobs`` worker processes), then the final fit on the
    training fold, timed. Returns ``(model, factor, seconds)``."""
    X, y, senti = data.X, data.y, data.senti

    def cost_for(idx_train, idx_all):
        if senti is None:
            return None
        return senti.make([X[i] for i in idx_train], [X[i] for i in idx_all])[0]

    options = dict(cfg.bedl_options or {})
    # labels seen only in a test fold sit at the origin
    options.setdefault("unknown", "origin")

    factors = list(cfg.grid.beta_factor)
    if len(factors) > 1:
        splits = [(tr[a], tr[b]) for a, b in inner_splits(y[tr], cfg.inner_folds, seed)]
        tasks = [(mode, K, factor, ia, ib, seed) for factor in factors for ia, ib in splits]
        errors = run_tasks(inner_bedl_error, tasks,
                           dict(X=X, y=y, senti=senti, options=options), cfg.n_jobs)
        per_factor = {f: [] for f in factors}
        for (_, _, factor, _, _, _), err in zip(tasks, errors):
            per_factor[factor].append(err)
        factor = select(factors, lambda f: mean_error(per_factor[f]))[0]
    else:
        factor = factors[0]
    torch.manual_seed(seed)
    m = len(tr)
    model = make_bedl(mode, K, 2 * K * m * factor, cost_for(tr, np.concatenate([tr, te])),
                      options)
    t0 = time.perf_counter()
    model.fit([X[i] for i in tr], y[tr])
    return model, factor, time.perf_counter() - t0


def inner_bedl_error(task, X, y, senti, options) -> Fraction:
    """Validation error of one BEDL fit of the nested beta search (one factor, one split); a
    task of :func:`~.pool.run_tasks`."""
    mode, K, factor, ia, ib, seed = task
    cost = None
    if senti is not None:
        cost = senti.make([X[i] for i in ia], [X[i] for i in np.concatenate([ia, ib])])[0]
    torch.manual_seed(seed)
    model = make_bedl(mode, K, 2 * K * len(ia) * factor, cost, options)
    model.fit([X[i] for i in ia], y[ia])
    return error_fraction(model.predict([X[i] for i in ib]), y[ib])

"""The paper's evaluation protocol: stratified cross-validation, nested hyper-parameter search,
four classifiers on three kinds of distances (initial, GESL, BEDL in pseudo and exact mode).

Per outer fold (``StratifiedKFold(folds, shuffle=True, random_state=seed)``):

1. **initial** distances (unit costs; Sentiment: the cosine cost on PCA-reduced GloVe vectors
   with ``Omega = I``, i.e. BEDL's starting point, gap and unlabeled inner nodes at the origin,
   see :class:`_SentimentCosts`). Each classifier picks its hyper-parameter by
   a nested stratified ``inner_folds``-fold search on the training distances, is refitted on the
   whole training fold and tested. MGLVQ's chosen number of prototypes ``K*`` is the ``K`` of
   the metric learners (paper: "the number of prototypes for BEDL, as well as the number of
   neighbors for GESL" is MGLVQ's optimal ``K``).
2. **GESL** (not for Sentiment, as in the paper): ``lam = 2 K* m f`` with ``f`` searched by the
   nested folds (criterion: MGLVQ(``K*``) validation error on the learned pseudo distances),
   refitted on the training fold; its distances are GESL's pseudo edit distances (scripts fixed
   at the unit cost, Bellet et al.'s definition).
3. **BEDL** (``mode`` pseudo and exact): ``beta = 2 K* m f`` with ``f`` searched by the nested
   folds (criterion: the BEDL model's own MGLVQ validation error), refitted on the training
   fold; its distances are exact edit distances under the learned costs in both modes (the mode
   only says how the costs were trained).

The metric learners' hyper-parameters are searched with the metric relearned on every inner
training split; the classifiers' hyper-parameters are searched on the distances of the metric
learned on the whole outer training fold (cheaper; the metric has seen the inner validation
points then, which is a mild optimism shared by all metrics). Sentiment: every metric learner and
classifier is trained on a random sample of 300 points of the training fold (paper), tested on
the whole test fold.

``runtime_s`` is the wall-clock time of learning the metric on the training fold (0 for the
initial distance); for GESL it counts pair selection, gathering the frequency matrices and the
QP, not the unit-cost co-optimal matrices (computed once per data set, shared with the initial
distances).
"""
from __future__ import annotations

import dataclasses
import json
import math
import platform
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["PAPER_FOLDS", "TRAIN_SAMPLE", "Grid", "full_grid", "quick_grid", "ExperimentConfig",
           "ExperimentResult", "run_experiment", "format_table", "METRICS", "CLASSIFIERS"]

PAPER_FOLDS = {"strings": 20, "minipalindrome": 6, "sorting": 8, "cystic": 10, "leukemia": 10,
               "sentiment": 20}
TRAIN_SAMPLE = {"sentiment": 300}
METRICS = ("initial", "gesl", "bedl_pseudo", "bedl_exact")
METRIC_TITLES = {"initial": "initial", "gesl": "GESL", "bedl_pseudo": "BEDL (pseudo)",
                 "bedl_exact": "BEDL (exact)"}
CLASSIFIERS = ("KNN", "MGLVQ", "SVM", "goodness")
#: BEDL settings of --quick: fewer alternation rounds and L-BFGS evaluations
QUICK_BEDL_OPTIONS = {"max_rounds": 3, "max_eval": 50}


@dataclass
class Grid:
    """Hyper-parameter candidates (in order of preference: ties go to the first)."""

    n_prototypes: List[int]
    n_neighbors: List[int]
    bandwidth: List[float]
    goodness_lam: List[float]
    beta_factor: List[float]  # BEDL beta = 2 K m factor
    gesl_factor: List[float]  # GESL lambda = 2 K m factor


def full_grid() -> Grid:
    """The paper's ranges: K and neighbours 1..15, bandwidth 0.1..10, lambda 1e-5..10,
    beta / GESL lambda 2 K m [1e-6, 1e-2] (log-spaced)."""
    return Grid(n_prototypes=list(range(1, 16)), n_neighbors=list(range(1, 16)),
                bandwidth=[float(v) for v in np.logspace(-1, 1, 7)],
                goodness_lam=[float(v) for v in np.logspace(-5, 1, 7)],
                beta_factor=[float(v) for v in np.logspace(-6, -2, 5)],
                gesl_factor=[float(v) for v in np.logspace(-6, -2, 5)])


def quick_grid() -> Grid:
    """A small grid for smoke runs; the metric learners get one fixed value each."""
    return Grid(n_prototypes=[1, 2], n_neighbors=[1, 3, 5], bandwidth=[1.0, 10.0],
                goodness_lam=[1e-3, 1e-1], beta_factor=[1e-4], gesl_factor=[1e-3])


@dataclass
class ExperimentConfig:
    dataset: str
    folds: Optional[int] = None  # default: the paper's count (PAPER_FOLDS)
    inner_folds: int = 5
    quick: bool = False
    seed: int = 0
    max_folds: Optional[int] = None  # run only the first max_folds outer folds
    metrics: Sequence[str] = METRICS
    classifiers: Sequence[str] = CLASSIFIERS
    train_sample: Optional[int] = None  # default: TRAIN_SAMPLE (Sentiment 300), else all
    bedl_options: Optional[Dict] = None  # extra BEDL keyword arguments (quick: short runs)
    progress: bool = True
    grid: Optional[Grid] = None  # default: quick_grid() if quick else full_grid()
    # Sentiment: compute on the trees' word (leaf) sequences, whose edit distances equal the
    # trees' under the cosine costs (see _SentimentCosts); False keeps the trees
    sentiment_leaves: bool = True
    # worker processes for BEDL's nested beta search (its inner fits are independent); the
    # final, timed fit always runs in the main process
    n_jobs: int = 1

    def resolved(self) -> "ExperimentConfig":
        cfg = dataclasses.replace(self)
        cfg.dataset = self.dataset.lower()
        if cfg.dataset not in PAPER_FOLDS:
            raise ValueError(f"unknown data set {self.dataset!r}; one of {sorted(PAPER_FOLDS)}")
        if cfg.folds is None:
            cfg.folds = PAPER_FOLDS[cfg.dataset]
        if cfg.train_sample is None:
            cfg.train_sample = TRAIN_SAMPLE.get(cfg.dataset)
        if cfg.grid is None:
            cfg.grid = quick_grid() if cfg.quick else full_grid()
        if cfg.bedl_options is None:
            cfg.bedl_options = dict(QUICK_BEDL_OPTIONS) if cfg.quick else {}
        bad = [m for m in cfg.metrics if m not in METRICS]
        if bad:
            raise ValueError(f"unknown metrics {bad}; choose from {METRICS}")
        bad = [c for c in cfg.classifiers if c not in CLASSIFIERS]
        if bad:
            raise ValueError(f"unknown classifiers {bad}; choose from {CLASSIFIERS}")
        if int(cfg.n_jobs) < 1:
            raise ValueError(f"n_jobs must be >= 1, got {cfg.n_jobs}")
        if cfg.dataset == "sentiment" and "gesl" in cfg.metrics:
            cfg.metrics = tuple(m for m in cfg.metrics if m != "gesl")
        if "MGLVQ" not in cfg.classifiers and any(m != "initial" for m in cfg.metrics):
            # K* comes from MGLVQ
            cfg.classifiers = ("MGLVQ",) + tuple(cfg.classifiers)
        cfg.metrics = tuple(cfg.metrics)
        cfg.classifiers = tuple(cfg.classifiers)
        return cfg

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return d


@dataclass
class ExperimentResult:
    config: dict
    records: List[dict] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    folds_done: int = 0
    interrupted: bool = False
    embedding: Optional[dict] = None  # {"labels": [...], "vectors": ndarray, "title": str}
    fold_info: List[dict] = field(default_factory=list)

    def summary(self) -> Dict[str, Dict[str, dict]]:
        """``{classifier or "runtime": {metric: {"mean", "std", "n"}}}``; errors in %."""
        out: Dict[str, Dict[str, dict]] = {}
        metrics = self.config["metrics"]
        for clf in self.config["classifiers"]:
            out[clf] = {}
            for m in metrics:
                vals = [100.0 * r["error"] for r in self.records
                        if r["classifier"] == clf and r["metric"] == m and r["error"] is not None]
                out[clf][m] = _stats(vals)
        out["runtime"] = {}
        for m in metrics:
            seen = {}
            for r in self.records:
                if r["metric"] == m and r["runtime_s"] is not None:
                    seen[r["fold"]] = r["runtime_s"]
            out["runtime"][m] = _stats(list(seen.values()))
        return out

    def table(self) -> str:
        return format_table(self)

    def to_json(self) -> dict:
        return {"dataset": self.config["dataset"], "config": self.config, "notes": self.notes,
                "folds_done": self.folds_done, "interrupted": self.interrupted,
                "summary": self.summary(), "table": self.table(), "fold_info": self.fold_info,
                "records": self.records,
                "environment": {"python": sys.version.split()[0],
                                "platform": platform.platform()}}


def _stats(vals):
    if not vals:
        return {"mean": None, "std": None, "n": 0}
    v = np.asarray(vals, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "n": int(len(v))}


def format_table(result: ExperimentResult) -> str:
    """Markdown table shaped like the paper's: rows = classifiers and the metric-learning
    runtime, columns = metrics; test error in % as mean +- std over the folds."""
    summ = result.summary()
    metrics = result.config["metrics"]
    head = "| " + result.config["dataset"] + " | " + " | ".join(
        METRIC_TITLES[m] for m in metrics) + " |"
    lines = [head, "|---" * (len(metrics) + 1) + "|"]
    for clf in result.config["classifiers"]:
        cells = []
        for m in metrics:
            s = summ[clf][m]
            cells.append("-" if s["n"] == 0 else f"{s['mean']:.1f} +- {s['std']:.1f}")
        lines.append(f"| {clf} | " + " | ".join(cells) + " |")
    cells = []
    for m in metrics:
        s = summ["runtime"][m]
        if m == "initial" or s["n"] == 0:
            cells.append("-")
        else:
            cells.append(f"{s['mean']:.3g} +- {s['std']:.2g}")
    lines.append("| runtime [s] | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- helpers
class _Progress:
    """tqdm when installed (and wanted), else one line per step on stderr."""

    def __init__(self, total, desc, enabled=True):
        self.enabled = enabled
        self.bar = None
        self.n = 0
        self.total = total
        self.desc = desc
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=True)
            except ImportError:
                self.bar = None

    def stage(self, text):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)
        else:
            print(f"[{self.desc}] fold {self.n + 1}/{self.total}: {text}", file=sys.stderr,
                  flush=True)

    def step(self):
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            print(f"[{self.desc}] fold {self.n}/{self.total} done", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _inner_splits(y, n_splits, seed):
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    counts = np.unique(y, return_counts=True)[1]
    k = int(min(n_splits, counts.min()))
    if k < 2:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        return list(skf.split(np.zeros(len(y)), y))


def _make_classifier(name, value):
    from ..learning import MedianGLVQ
    from .classifiers import GoodnessClassifier, KNNClassifier, SVMClassifier

    if name == "KNN":
        return KNNClassifier(n_neighbors=int(value))
    if name == "MGLVQ":
        return MedianGLVQ(n_prototypes=int(value))
    if name == "SVM":
        return SVMClassifier(bandwidth=float(value))
    if name == "goodness":
        return GoodnessClassifier(lam=float(value))
    raise ValueError(name)


def _classifier_grid(name, grid: Grid):
    return {"KNN": grid.n_neighbors, "MGLVQ": grid.n_prototypes, "SVM": grid.bandwidth,
            "goodness": grid.goodness_lam}[name]


_PARAM_NAME = {"KNN": "n_neighbors", "MGLVQ": "n_prototypes", "SVM": "bandwidth",
               "goodness": "lam"}


def _select(candidates, evaluate):
    """Candidate with the smallest mean validation error (first on ties) and all scores."""
    scores = [float(evaluate(c)) for c in candidates]
    best = int(np.argmin(scores))
    return candidates[best], scores


def _error(pred, y):
    return float(np.mean(np.asarray(pred) != np.asarray(y)))


def _classify(name, grid, D_tr, y_tr, D_te, y_te, inner, seed):
    """Nested search on D_tr, refit, test. Returns (error, chosen value, classifier seconds)."""
    t0 = time.perf_counter()
    cands = list(_classifier_grid(name, grid))
    if len(cands) > 1:
        splits = _inner_splits(y_tr, inner, seed)

        def evaluate(value):
            errs = []
            for a, b in splits:
                clf = _make_classifier(name, value).fit(D_tr[np.ix_(a, a)], y_tr[a])
                errs.append(_error(clf.predict(D_tr[np.ix_(b, a)]), y_tr[b]))
            return np.mean(errs) if errs else 0.0

        value, _ = _select(cands, evaluate)
    else:
        value = cands[0]
    clf = _make_classifier(name, value).fit(D_tr, y_tr)
    err = _error(clf.predict(D_te), y_te)
    return err, value, time.perf_counter() - t0


def _np(D):
    if hasattr(D, "detach"):
        D = D.detach().cpu().double().numpy()
    return np.asarray(D, dtype=np.float64)


# --------------------------------------------------------------------------- data and costs
def _load(dataset):
    from ..datasets import load

    X, y = load(dataset)
    return list(X), np.asarray(y)


class _SentimentCosts:
    """Per-fold cosine costs for Sentiment: GloVe vectors of the fold's words, PCA fitted on the
    training sample's words (95% of the variance), out-of-vocabulary words at the zero vector
    (cost 1/2 against any other word, ``GAP_COST`` to insert/delete, see CosineCost).

    Gap and unlabeled inner nodes (the paper leaves them open) sit at the origin: deleting or
    inserting a word costs ``GAP_COST = 1/4`` (``||u - 0||^2 / 4`` for a unit vector ``u``, the
    cosine cost being ``||u - v||^2 / 4``), an unlabeled node costs like the gap (0 to insert or
    delete, 1/4 against a word), so the distance between two SST trees is the edit distance of
    their leaf sequences (for any ``Omega``: a mapping can drop its inner-node pairs at no
    extra cost, and a leaf alignment is a tree mapping); the protocol therefore computes on
    the word sequences by default (``ExperimentConfig.sentiment_leaves``). With the earlier choice (gap and unlabeled nodes 1/2 against
    everything) the tree structure dominated and the initial distance was near chance (issue
    #4; measurements in benchmarks/paper_table.md, "## Sentiment")."""

    GAP_COST = 0.25
    UNLABELED = "gap"

    def __init__(self):
        from ..datasets import load_glove_subset

        words, vectors = load_glove_subset()
        self.index = {w: i for i, w in enumerate(words)}
        self.vectors = vectors

    def make(self, X_train, X_all):
        import torch

        from ..pretrained import CosineCost, pca_reduce

        def words_of(objs):
            seen = {}
            for t in objs:
                for label in getattr(t, "labels", t):
                    if label is not None:
                        seen.setdefault(label, None)
            return list(seen)

        train_words = [w for w in words_of(X_train) if w in self.index]
        alphabet = words_of(X_all)
        V = torch.as_tensor(self.vectors[[self.index[w] for w in train_words]], dtype=torch.float64)
        _, comps, mean = pca_reduce(V, 0.95, return_mean=True)
        vec = torch.zeros(len(alphabet), comps.shape[0], dtype=torch.float64)
        known = [i for i, w in enumerate(alphabet) if w in self.index]
        if known:
            G = torch.as_tensor(self.vectors[[self.index[alphabet[i]] for i in known]],
                                dtype=torch.float64)
            vec[known] = (G - mean) @ comps.T
        info = {"pca_dims": int(comps.shape[0]), "n_words": len(alphabet),
                "n_oov_words": len(alphabet) - len(known)}
        info["gap_cost"] = self.GAP_COST
        return CosineCost(alphabet, vec, gap_cost=self.GAP_COST, unlabeled=self.UNLABELED), info


def _leaf_sequence(tree):
    """The labels of a tree's leaves, left to right (an SST tree's words)."""
    labels = tree.labels
    return [labels[i] for i in tree.leaves()]


def _alphabet(X):
    seen = {}
    for obj in X:
        for label in getattr(obj, "labels", obj):
            seen.setdefault(label, None)
    return list(seen)


def _make_bedl(mode, K, beta, cost_factory, options):
    from ..learning import BEDL

    kwargs = dict(n_prototypes=int(K), beta=float(beta), mode=mode)
    kwargs.update(options)
    if cost_factory is not None:
        kwargs["cost"] = cost_factory
    return BEDL(**kwargs)


# --------------------------------------------------------------------------- the experiment
def run_experiment(config: ExperimentConfig, result: Optional[ExperimentResult] = None,
                   on_fold: Optional[Callable[[ExperimentResult], None]] = None) -> ExperimentResult:
    """Run the protocol. Records are appended to ``result`` as they are produced (pass your own
    ``result`` to keep the partial results when a KeyboardInterrupt stops the run; the interrupt
    is re-raised). ``on_fold(result)`` is called after each completed outer fold."""
    from sklearn.model_selection import StratifiedKFold

    cfg = config.resolved()
    if result is None:
        result = ExperimentResult(config={})
    cfg_dict = cfg.to_dict()
    cfg_dict["grid"] = dataclasses.asdict(cfg.grid)
    result.config = cfg_dict
    ds = cfg.dataset
    X, y = _load(ds)
    N = len(X)
    notes = result.notes
    notes.append(f"{ds}: {N} items, classes {np.bincount(y).tolist()}, {cfg.folds}-fold "
                 f"stratified CV (seed {cfg.seed}), nested {cfg.inner_folds}-fold search, "
                 f"{'quick' if cfg.quick else 'full'} grid"
                 + (f", BEDL options {cfg.bedl_options}" if cfg.bedl_options else ""))
    sentiment = ds == "sentiment"
    if sentiment and cfg.sentiment_leaves:
        X = [_leaf_sequence(t) for t in X]
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
                     f"{_SentimentCosts.GAP_COST:g}, unlabeled nodes free to insert/delete and "
                     f"{_SentimentCosts.GAP_COST:g} against a word, so only the leaf sequences "
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

    progress = _Progress(min(cfg.folds, cfg.max_folds or cfg.folds), ds, cfg.progress)
    # shared precomputation: unit-cost frequency rows (GESL) / unit distances (initial)
    freq = None
    D_unit = None
    if not sentiment:
        if "gesl" in cfg.metrics:
            from .gesl import PairFrequencies

            progress.stage("unit-cost co-optimal matrices")
            freq = PairFrequencies(X)
            D_unit = freq.reference_matrix(np.arange(N))
        else:
            from ..ops import pairwise_distances

            progress.stage("unit-cost distances")
            D_unit = _np(pairwise_distances(X))
    senti = _SentimentCosts() if sentiment else None
    alphabet = _alphabet(X) if not sentiment else None

    if any(m.startswith("bedl") for m in cfg.metrics):
        progress.stage("warm-up")
        _warm_up(X, y)

    skf = StratifiedKFold(n_splits=cfg.folds, shuffle=True, random_state=cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    try:
        for fold, (tr, te) in enumerate(skf.split(np.zeros(N), y)):
            if cfg.max_folds is not None and fold >= cfg.max_folds:
                break
            if cfg.train_sample and len(tr) > cfg.train_sample:
                tr = np.sort(rng.choice(tr, cfg.train_sample, replace=False))
            _run_fold(cfg, result, fold, tr, te, X, y, freq, D_unit, senti, alphabet, progress)
            result.folds_done = fold + 1
            progress.step()
            if on_fold is not None:
                on_fold(result)
    except KeyboardInterrupt:
        result.interrupted = True
        notes.append(f"interrupted after {result.folds_done} complete folds")
        raise
    finally:
        progress.close()
    return result


def _run_fold(cfg, result, fold, tr, te, X, y, freq, D_unit, senti, alphabet, progress):
    import torch

    grid = cfg.grid
    y_tr, y_te = y[tr], y[te]
    X_tr = [X[i] for i in tr]
    X_te = [X[i] for i in te]
    m = len(tr)
    seed = cfg.seed * 1000 + fold
    info = {"fold": fold, "n_train": int(m), "n_test": int(len(te))}
    result.fold_info.append(info)

    def record(clf, metric, err, value, runtime, extra=None):
        rec = {"dataset": cfg.dataset, "classifier": clf, "metric": metric, "fold": fold,
               "error": err, "runtime_s": runtime, "param": _PARAM_NAME[clf],
               "value": value, "n_train": int(m), "n_test": int(len(te))}
        if extra:
            rec.update(extra)
        result.records.append(rec)

    def classify_all(metric, D_tr, D_te, runtime, extra=None):
        chosen = {}
        for clf in cfg.classifiers:
            progress.stage(f"{metric}: {clf}")
            err, value, _ = _classify(clf, grid, D_tr, y_tr, D_te, y_te, cfg.inner_folds, seed)
            chosen[clf] = value
            record(clf, metric, err, value, runtime, extra)
        return chosen

    # ---- initial
    progress.stage("initial distances")
    if senti is not None:
        from ..ops import pairwise_distances

        cost0, sinfo = senti.make(X_tr, X_tr + X_te)
        info.update(sinfo)
        with torch.no_grad():
            D_tr0 = _np(pairwise_distances(X_tr, cost=cost0))
            D_te0 = _np(pairwise_distances(X_te, X_tr, cost=cost0))
    else:
        D_tr0 = D_unit[np.ix_(tr, tr)]
        D_te0 = D_unit[np.ix_(te, tr)]
    chosen = classify_all("initial", D_tr0, D_te0, 0.0) if "initial" in cfg.metrics else {}
    if not any(mt != "initial" for mt in cfg.metrics):
        return
    if "MGLVQ" not in chosen:
        chosen["MGLVQ"] = _classify("MGLVQ", grid, D_tr0, y_tr, D_te0, y_te, cfg.inner_folds,
                                    seed)[1]
    K = int(chosen["MGLVQ"])
    info["K"] = K

    # ---- GESL
    if "gesl" in cfg.metrics:
        from .gesl import GESL
        from ..learning import MedianGLVQ

        progress.stage("GESL")
        try:
            def gesl_val_error(factor):
                errs = []
                for a, b in _inner_splits(y_tr, cfg.inner_folds, seed):
                    ia, ib = tr[a], tr[b]
                    g = GESL(n_neighbors=K, lam=2 * K * len(a) * factor)
                    g.fit_frequencies(freq, ia, y[ia])
                    Da = freq.pseudo_matrix(ia, ia, g.C_)
                    Db = freq.pseudo_matrix(ib, ia, g.C_)
                    clf = MedianGLVQ(n_prototypes=K).fit(Da, y[ia])
                    errs.append(_error(clf.predict(Db), y[ib]))
                return np.mean(errs) if errs else 0.0

            factors = list(grid.gesl_factor)
            t0 = time.perf_counter()
            factor = _select(factors, gesl_val_error)[0] if len(factors) > 1 else factors[0]
            search_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            g = GESL(n_neighbors=K, lam=2 * K * m * factor).fit_frequencies(freq, tr, y_tr)
            runtime = time.perf_counter() - t0
            D_tr = freq.pseudo_matrix(tr, tr, g.C_)
            D_te = freq.pseudo_matrix(te, tr, g.C_)
            info["gesl"] = {"factor": factor, "lam": 2 * K * m * factor, "eta": g.eta_,
                            "qp_gap": g.info_["gap"], "objective": g.info_["objective"],
                            "search_s": search_s}
            classify_all("gesl", D_tr, D_te, runtime, {"metric_param": factor})
        except Exception as exc:  # keep the other metrics going; say what failed
            _fail(result, cfg, "gesl", fold, exc)

    # ---- BEDL, both modes
    for metric in ("bedl_pseudo", "bedl_exact"):
        if metric not in cfg.metrics:
            continue
        mode = metric.split("_")[1]
        progress.stage(f"BEDL ({mode})")
        try:
            t0 = time.perf_counter()
            model, factor, runtime = _fit_bedl(cfg, mode, K, X, y, tr, te, seed, senti,
                                               alphabet)
            search_s = time.perf_counter() - t0 - runtime

            progress.stage(f"BEDL ({mode}) distances")
            with torch.no_grad():
                D_tr = _np(model.pairwise_distances(X_tr))
                D_te = _np(model.pairwise_distances(X_te, X_tr))
            info[metric] = {"factor": factor, "beta": 2 * K * m * factor, "search_s": search_s,
                            "test_error_own": _error(model.predict(X_te), y_te)}
            classify_all(metric, D_tr, D_te, runtime, {"metric_param": factor})
            result.embedding = _embedding_of(model, metric, fold) or result.embedding
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            _fail(result, cfg, metric, fold, exc)


def _fail(result, cfg, metric, fold, exc):
    import traceback

    msg = f"fold {fold}: {metric} failed: {type(exc).__name__}: {exc}"
    print("warning: " + msg + "\n" + traceback.format_exc(), file=sys.stderr)
    result.notes.append(msg)
    for clf in cfg.classifiers:
        result.records.append({"dataset": cfg.dataset, "classifier": clf, "metric": metric,
                               "fold": fold, "error": None, "runtime_s": None,
                               "failed": f"{type(exc).__name__}: {exc}"})


def _warm_up(X, y):
    """One tiny untimed BEDL fit per mode, so that one-off start-up costs (lazy imports, first
    kernel calls) do not land in the first timed fold."""
    idx = np.concatenate([np.flatnonzero(y == c)[:2] for c in np.unique(y)])
    for mode in ("pseudo", "exact"):
        try:
            _make_bedl(mode, 1, 0.0, None, {"max_rounds": 1, "max_eval": 2,
                                           "unknown": "origin"}).fit([X[i] for i in idx], y[idx])
        except Exception:  # noqa: BLE001 - the real fit will report the problem
            pass


def _fit_bedl(cfg, mode, K, X, y, tr, te, seed, senti, alphabet):
    """Nested search of beta, then the final fit on the training fold (timed)."""
    import torch

    def cost_for(idx_train, idx_all):
        if senti is None:
            return None
        return senti.make([X[i] for i in idx_train], [X[i] for i in idx_all])[0]

    options = dict(cfg.bedl_options or {})
    # labels seen only in a test fold sit at the origin (the design's documented option)
    options.setdefault("unknown", "origin")

    factors = list(cfg.grid.beta_factor)
    if len(factors) > 1:
        splits = [(tr[a], tr[b]) for a, b in _inner_splits(y[tr], cfg.inner_folds, seed)]
        tasks = [(mode, K, factor, ia, ib, seed) for factor in factors for ia, ib in splits]
        errors = _run_tasks(_inner_bedl_error, tasks,
                            dict(X=X, y=y, senti=senti, options=options), cfg.n_jobs)
        per_factor = {f: [] for f in factors}
        for (_, _, factor, _, _, _), err in zip(tasks, errors):
            per_factor[factor].append(err)
        factor = _select(factors, lambda f: np.mean(per_factor[f]) if per_factor[f] else 0.0)[0]
    else:
        factor = factors[0]
    torch.manual_seed(seed)
    m = len(tr)
    model = _make_bedl(mode, K, 2 * K * m * factor, cost_for(tr, np.concatenate([tr, te])),
                       options)
    t0 = time.perf_counter()
    model.fit([X[i] for i in tr], y[tr])
    return model, factor, time.perf_counter() - t0


def _inner_bedl_error(task, X, y, senti, options):
    """Validation error of one BEDL fit of the nested beta search (one factor, one split)."""
    import torch

    mode, K, factor, ia, ib, seed = task
    cost = None
    if senti is not None:
        cost = senti.make([X[i] for i in ia], [X[i] for i in np.concatenate([ia, ib])])[0]
    torch.manual_seed(seed)
    model = _make_bedl(mode, K, 2 * K * len(ia) * factor, cost, options)
    model.fit([X[i] for i in ia], y[ia])
    return _error(model.predict([X[i] for i in ib]), y[ib])


#: what forked workers of _run_tasks read (set before the pool starts, inherited by fork)
_TASK_CONTEXT: dict = {}


def _task_worker_init():
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    torch.set_num_threads(1)  # one core per worker


def _task_call(args):
    fn, task = args
    return fn(task, **_TASK_CONTEXT)


def _run_tasks(fn, tasks, context, n_jobs):
    """``[fn(task, **context) for task in tasks]``, on ``n_jobs`` forked worker processes when
    ``n_jobs > 1`` (results in task order; the context is inherited, not pickled)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n_jobs = min(int(n_jobs), len(tasks))
    if n_jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(task, **context) for task in tasks]

    _TASK_CONTEXT.clear()
    _TASK_CONTEXT.update(context)
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=multiprocessing.get_context("fork"),
                               initializer=_task_worker_init)
    try:
        results = list(pool.map(_task_call, [(fn, t) for t in tasks]))
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()  # running fits stop too
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        _TASK_CONTEXT.clear()
    pool.shutdown()
    return results


def _embedding_of(model, metric, fold):
    """Symbol vectors of a fitted BEDL model's cost, for the PCA plot."""
    cost = getattr(model, "cost_", None)
    if cost is None:
        return None
    if hasattr(cost, "embedding"):
        V = cost.embedding.detach().cpu().double().numpy()
        V = np.vstack([V, np.zeros((1, V.shape[1]))])
        labels = [str(s) for s in cost.alphabet] + ["(gap)"]
    elif hasattr(cost, "mapped_vectors"):
        V = cost.mapped_vectors().detach().cpu().double().numpy()[:cost.n_words]
        labels = [str(s) for s in cost.alphabet[:cost.n_words]]
    else:
        return None
    return {"labels": labels, "vectors": V, "title": f"{metric}, fold {fold}"}


def embedding_pca(vectors: np.ndarray, n_components: int = 2) -> np.ndarray:
    """Project rows onto their first principal components (SVD of the centred matrix)."""
    V = np.asarray(vectors, dtype=np.float64)
    Vc = V - V.mean(0, keepdims=True)
    if Vc.shape[1] == 0 or not np.any(Vc):
        return np.zeros((len(V), n_components))
    _, _, Wt = np.linalg.svd(Vc, full_matrices=False)
    out = Vc @ Wt[:n_components].T
    if out.shape[1] < n_components:
        out = np.hstack([out, np.zeros((len(V), n_components - out.shape[1]))])
    return out


def save_embedding_plot(embedding: dict, path, max_points: int = 400, seed: int = 0) -> None:
    """PNG of the 2-D PCA of the learned symbol vectors (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    V, labels = embedding["vectors"], embedding["labels"]
    idx = np.arange(len(V))
    if len(idx) > max_points:
        idx = np.sort(np.random.default_rng(seed).choice(idx, max_points, replace=False))
    xy = embedding_pca(V[idx])
    fig, ax = plt.subplots(figsize=(6, 5))
    ax.scatter(xy[:, 0], xy[:, 1], s=18, alpha=0.7)
    if len(idx) <= 80:
        # points that coincide (e.g. symbols the metric merged) share one annotation
        scale = max(float(np.abs(xy).max()), 1e-12)
        groups: Dict[tuple, list] = {}
        for (px, py), k in zip(xy, idx):
            key = (round(px / scale, 3), round(py / scale, 3))
            groups.setdefault(key, [px, py, []])[2].append(str(labels[k]))
        for px, py, names in groups.values():
            ax.annotate(", ".join(names), (px, py), fontsize=8, xytext=(3, 3),
                        textcoords="offset points")
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(f"PCA of the learned embedding ({embedding.get('title', '')})")
    # bbox_inches="tight" instead of tight_layout(): the latter warns for figures
    # with long symbol labels and then does nothing.
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def write_results(result: ExperimentResult, out_dir) -> dict:
    """Write ``results.json`` (and ``embedding.png`` when there is an embedding)."""
    import pathlib

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = result.to_json()
    paths = {"results": str(out / "results.json")}
    if result.embedding is not None:
        try:
            save_embedding_plot(result.embedding, out / "embedding.png")
            paths["embedding"] = str(out / "embedding.png")
        except Exception as exc:  # a plot must not lose the results
            result.notes.append(f"embedding plot failed: {type(exc).__name__}: {exc}")
            data = result.to_json()
    tmp = out / "results.json.tmp"
    tmp.write_text(json.dumps(_jsonable(data), indent=1))
    tmp.replace(out / "results.json")
    return paths


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj

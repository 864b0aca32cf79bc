"""Configuration of the paper's protocol: data sets and their fold counts, metrics,
classifiers, hyper-parameter grids and :class:`ExperimentConfig`."""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

__all__ = ["PAPER_FOLDS", "TRAIN_SAMPLE", "METRICS", "METRIC_TITLES", "CLASSIFIERS",
           "QUICK_BEDL_OPTIONS", "RUN_ONLY_FIELDS", "PAPER_BANDWIDTHS",
           "PAPER_GOODNESS_LAMBDAS", "PAPER_FACTORS", "Grid", "full_grid", "quick_grid",
           "ExperimentConfig", "config_differences"]

#: outer folds per data set, as in the paper
PAPER_FOLDS = {"strings": 20, "minipalindrome": 6, "sorting": 8, "cystic": 10, "leukemia": 10,
               "sentiment": 20}
#: training points sampled from each training fold (the paper's Sentiment setting)
TRAIN_SAMPLE = {"sentiment": 300}
METRICS = ("initial", "gesl", "bedl_pseudo", "bedl_exact")
METRIC_TITLES = {"initial": "initial", "gesl": "GESL", "bedl_pseudo": "BEDL (pseudo)",
                 "bedl_exact": "BEDL (exact)"}
CLASSIFIERS = ("KNN", "MGLVQ", "SVM", "goodness")
#: configuration fields that say how far or how a run goes, not what it computes: results
#: that differ only in these can be continued (resumed) by each other
RUN_ONLY_FIELDS = ("max_folds", "progress", "n_jobs")
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


#: The paper's grids as decimal literals. They are never computed (np.logspace's vectorised
#: power gives 9.999999999999999e-06 for 1e-5 on AVX-512 processors): the same grid, and so the
#: same hyper-parameters, on every processor. The bandwidths are 10 ** (k / 3) for k = -3..3,
#: written as the doubles the committed tables used.
PAPER_BANDWIDTHS = (0.1, 0.21544346900318834, 0.46415888336127786, 1.0, 2.1544346900318834,
                    4.6415888336127775, 10.0)
PAPER_GOODNESS_LAMBDAS = (1e-05, 0.0001, 0.001, 0.01, 0.1, 1.0, 10.0)
PAPER_FACTORS = (1e-06, 1e-05, 0.0001, 0.001, 0.01)


def full_grid() -> Grid:
    """The paper's ranges: K and neighbours 1..15, bandwidth 0.1..10, lambda 1e-5..10,
    beta / GESL lambda 2 K m [1e-6, 1e-2] (log-spaced; :data:`PAPER_BANDWIDTHS` and friends)."""
    return Grid(n_prototypes=list(range(1, 16)), n_neighbors=list(range(1, 16)),
                bandwidth=list(PAPER_BANDWIDTHS), goodness_lam=list(PAPER_GOODNESS_LAMBDAS),
                beta_factor=list(PAPER_FACTORS), gesl_factor=list(PAPER_FACTORS))


def quick_grid() -> Grid:
    """A small grid for smoke runs; the metric learners get one fixed value each."""
    return Grid(n_prototypes=[1, 2], n_neighbors=[1, 3, 5], bandwidth=[1.0, 10.0],
                goodness_lam=[1e-3, 1e-1], beta_factor=[1e-4], gesl_factor=[1e-3])


def _check_grid(grid: Grid) -> None:
    """ValueError naming the first grid field with no candidate or one outside its range."""
    for name in ("n_prototypes", "n_neighbors"):
        values = list(getattr(grid, name))
        if not values or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1
                             for v in values):
            raise ValueError(f"grid {name} must be ints >= 1, got {values}")
    for name, zero_ok in (("bandwidth", False), ("goodness_lam", False), ("beta_factor", True),
                          ("gesl_factor", False)):
        values = list(getattr(grid, name))
        low_ok = (lambda v: v >= 0.0) if zero_ok else (lambda v: v > 0.0)
        if not values or not all(isinstance(v, numbers.Real) and math.isfinite(v) and low_ok(v)
                                 for v in values):
            raise ValueError(f"grid {name} must be finite numbers {'>=' if zero_ok else '>'} 0, got {values}")


def _check_bedl_options(options: Dict) -> None:
    """The extra BEDL keyword arguments, checked by BEDL itself once (not in every fold)."""
    from ...learning import BEDL  # (the learning layer below; imported where used)

    try:
        model = BEDL(**options)
    except TypeError as error:
        raise ValueError(f"bedl_options: {error}") from None
    model._validate_params()


@dataclass
class ExperimentConfig:
    """What to run: a data set, the folds, metrics, classifiers and grids (defaults from the
    paper); :meth:`resolved` fills in the defaults and checks the choices."""

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
    # trees' under the cosine costs (see data.SentimentCosts); False keeps the trees
    sentiment_leaves: bool = True
    # worker processes for BEDL's nested beta search (its inner fits are independent); the
    # final, timed fit always runs in the main process
    n_jobs: int = 1
    # a stratified subsample of about this many items of the data set (smoke tests); None: all
    max_items: Optional[int] = None

    def resolved(self) -> "ExperimentConfig":
        """A copy with every default filled in. Sentiment drops GESL (as in the paper); MGLVQ is
        added to the classifiers when a metric learner needs its ``K``.

        Raises:
            ValueError: an unknown data set, metric or classifier, ``n_jobs < 1``, fewer than 2
                folds or inner folds, ``max_items < 2``, a negative seed or ``train_sample``,
                grid candidates outside their range (counts >= 1; bandwidths, goodness and
                GESL lambdas finite and > 0; beta factors finite and >= 0), or BEDL options
                that BEDL rejects; checked here, not in every fold.
        """
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
        if int(cfg.folds) < 2 or int(cfg.inner_folds) < 2:
            raise ValueError(f"folds and inner_folds must be >= 2, got {cfg.folds} and "
                             f"{cfg.inner_folds}")
        if cfg.max_folds is not None and int(cfg.max_folds) < 1:
            raise ValueError(f"max_folds must be >= 1 or None, got {cfg.max_folds}")
        if cfg.max_items is not None and int(cfg.max_items) < 2:
            raise ValueError(f"max_items must be >= 2 or None, got {cfg.max_items}")
        if isinstance(cfg.seed, bool) or not isinstance(cfg.seed, numbers.Integral) or cfg.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {cfg.seed!r}")
        if cfg.train_sample is not None and int(cfg.train_sample) < 0:
            raise ValueError(f"train_sample must be >= 0 (0: the whole training fold) or None, got "
                             f"{cfg.train_sample}")
        _check_grid(cfg.grid)
        _check_bedl_options(cfg.bedl_options)
        if cfg.dataset == "sentiment" and "gesl" in cfg.metrics:
            cfg.metrics = tuple(m for m in cfg.metrics if m != "gesl")
        if "MGLVQ" not in cfg.classifiers and any(m != "initial" for m in cfg.metrics):
            # K* comes from MGLVQ
            cfg.classifiers = ("MGLVQ",) + tuple(cfg.classifiers)
        cfg.metrics = tuple(cfg.metrics)
        cfg.classifiers = tuple(cfg.classifiers)
        return cfg

    def to_dict(self) -> dict:
        """The fields as a plain dict (for results.json)."""
        return dataclasses.asdict(self)


def _plain(value):
    """A configuration value as JSON reads it back (tuples as lists, numpy scalars as numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def config_differences(stored: dict, wanted: dict) -> List[str]:
    """The fields (grid entries as ``grid.NAME``) in which two resolved configurations (as
    dicts, e.g. one read from results.json) compute different results, each as
    ``"name: stored -> wanted"``; :data:`RUN_ONLY_FIELDS` are not compared. A field missing on
    one side reads as its :class:`ExperimentConfig` default (results written before the field
    existed computed what the default computes), else as absent."""
    missing = "(absent)"
    defaults = {f.name: _plain(f.default) for f in dataclasses.fields(ExperimentConfig)
                if f.default is not dataclasses.MISSING}
    stored = {**defaults, **_plain(stored)}
    wanted = {**defaults, **_plain(wanted)}
    out = []
    for name in sorted(set(stored) | set(wanted)):
        if name in RUN_ONLY_FIELDS:
            continue
        a, b = stored.get(name, missing), wanted.get(name, missing)
        if name == "grid" and isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                ga, gb = a.get(key, missing), b.get(key, missing)
                if ga != gb:
                    out.append(f"grid.{key}: {ga} -> {gb}")
        elif a != b:
            out.append(f"{name}: {a} -> {b}")
    return out

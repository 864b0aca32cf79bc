"""The paper's evaluation protocol: stratified cross-validation, nested hyper-parameter search,
four classifiers on three kinds of distances (initial, GESL, BEDL in pseudo and exact mode).

Per outer fold (``StratifiedKFold(folds, shuffle=True, random_state=seed)``):

1. **initial** distances (unit costs; Sentiment: the cosine cost on PCA-reduced GloVe vectors
   with ``Omega = I``, i.e. BEDL's starting point, gap and unlabeled inner nodes at the origin,
   see :class:`.data.SentimentCosts`). Each classifier picks its hyper-parameter by
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

Modules: :mod:`.config` (data sets, metrics, classifiers, grids, :class:`ExperimentConfig`),
:mod:`.data` (the data sets and Sentiment's cosine costs), :mod:`.folds` (the fold loop and the
nested searches), :mod:`.report` (results, the table, results.json, the plot), :mod:`.pool`
(worker processes for the nested BEDL fits), :mod:`.runs` (resumable runs on disk and what they
record about the machine), :mod:`.export` (compact per-data-set results), :mod:`.paper` (the
paper's numbers) and :mod:`.render` (the paper table in Markdown). Imports scikit-learn and
scipy.
"""
from .config import (
    CLASSIFIERS,
    METRIC_TITLES,
    METRICS,
    PAPER_FOLDS,
    QUICK_BEDL_OPTIONS,
    RUN_ONLY_FIELDS,
    TRAIN_SAMPLE,
    ExperimentConfig,
    Grid,
    full_grid,
    config_differences,
    quick_grid,
)
from .folds import run_experiment
from .report import ExperimentResult, embedding_pca, format_table, save_embedding_plot, write_results
from .runs import ConfigMismatchError, load_previous, run_dataset
from .export import compact_results, export_runs, load_runs
from .paper import PAPER_ERRORS, PAPER_RUNTIME_S
from .render import flagged_cells, render_paper_table

__all__ = ["PAPER_FOLDS", "TRAIN_SAMPLE", "Grid", "full_grid", "quick_grid", "ExperimentConfig",
           "ExperimentResult", "run_experiment", "format_table", "METRICS", "CLASSIFIERS",
           "METRIC_TITLES", "QUICK_BEDL_OPTIONS", "write_results", "embedding_pca",
           "save_embedding_plot", "RUN_ONLY_FIELDS", "config_differences", "ConfigMismatchError",
           "load_previous", "run_dataset", "compact_results", "export_runs", "load_runs",
           "PAPER_ERRORS", "PAPER_RUNTIME_S", "flagged_cells", "render_paper_table"]

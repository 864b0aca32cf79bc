"""The numbers the paper reports: test error in % (mean, std over the cross-validation folds)
per data set, classifier and metric, and the metric-learning runtime in seconds.

Source: B. Paaßen, C. Gallicchio, A. Micheli, B. Hammer, "Tree Edit Distance Learning via
Adaptive Symbol Embeddings", ICML 2018, the table of results in the experiments section
(original Java/MATLAB implementation on an Intel Core i7-7700HQ laptop). The paper's BEDL column
is BEDL trained with the pseudo edit distance (``mode="pseudo"``); GESL was not run on
Sentiment.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

__all__ = ["PAPER_ERRORS", "PAPER_RUNTIME_S", "PAPER_METRICS", "PAPER_CITATION",
           "paper_metric_of", "paper_error"]

PAPER_CITATION = ("Paaßen, Gallicchio, Micheli & Hammer, \"Tree Edit Distance Learning via "
                  "Adaptive Symbol Embeddings\", ICML 2018")

#: the paper's columns
PAPER_METRICS = ("initial", "gesl", "bedl")

_E = Tuple[float, float]
#: ``{dataset: {classifier: {"initial" | "gesl" | "bedl": (mean %, std %)}}}``
PAPER_ERRORS: Dict[str, Dict[str, Dict[str, _E]]] = {
    "strings": {
        "KNN": {"initial": (21.0, 10.2), "gesl": (23.0, 10.8), "bedl": (0.0, 0.0)},
        "MGLVQ": {"initial": (36.0, 15.7), "gesl": (34.0, 11.0), "bedl": (0.0, 0.0)},
        "SVM": {"initial": (9.0, 11.2), "gesl": (10.0, 8.6), "bedl": (0.0, 0.0)},
        "goodness": {"initial": (11.5, 9.3), "gesl": (0.5, 2.2), "bedl": (0.0, 0.0)},
    },
    "minipalindrome": {
        "KNN": {"initial": (12.5, 11.2), "gesl": (12.5, 7.9), "bedl": (10.4, 9.4)},
        "MGLVQ": {"initial": (2.1, 5.1), "gesl": (4.2, 6.5), "bedl": (0.0, 0.0)},
        "SVM": {"initial": (4.2, 6.5), "gesl": (20.8, 15.1), "bedl": (0.0, 0.0)},
        "goodness": {"initial": (6.2, 6.8), "gesl": (14.6, 5.1), "bedl": (8.3, 10.2)},
    },
    "sorting": {
        "KNN": {"initial": (15.6, 8.8), "gesl": (18.8, 16.4), "bedl": (10.9, 8.0)},
        "MGLVQ": {"initial": (14.1, 10.4), "gesl": (14.1, 8.0), "bedl": (14.1, 8.0)},
        "SVM": {"initial": (10.9, 8.0), "gesl": (9.4, 8.8), "bedl": (9.4, 8.8)},
        "goodness": {"initial": (15.6, 11.1), "gesl": (17.2, 14.8), "bedl": (17.2, 9.3)},
    },
    "cystic": {
        "KNN": {"initial": (31.2, 6.6), "gesl": (32.5, 10.1), "bedl": (28.1, 8.5)},
        "MGLVQ": {"initial": (34.4, 6.8), "gesl": (33.1, 9.8), "bedl": (30.0, 10.1)},
        "SVM": {"initial": (28.1, 9.0), "gesl": (33.1, 8.9), "bedl": (29.4, 12.5)},
        "goodness": {"initial": (28.1, 8.5), "gesl": (26.2, 14.4), "bedl": (24.4, 13.3)},
    },
    "leukemia": {
        "KNN": {"initial": (7.5, 2.6), "gesl": (8.2, 4.6), "bedl": (7.3, 4.3)},
        "MGLVQ": {"initial": (9.5, 4.0), "gesl": (10.9, 4.7), "bedl": (9.5, 3.0)},
        "SVM": {"initial": (7.0, 4.1), "gesl": (8.8, 2.9), "bedl": (6.8, 4.7)},
        "goodness": {"initial": (6.1, 4.3), "gesl": (10.0, 4.4), "bedl": (6.3, 3.8)},
    },
    "sentiment": {
        "KNN": {"initial": (40.2, 2.8), "bedl": (38.2, 3.3)},
        "MGLVQ": {"initial": (44.0, 2.6), "bedl": (41.3, 5.7)},
        "SVM": {"initial": (34.3, 3.0), "bedl": (33.3, 3.6)},
        "goodness": {"initial": (43.7, 1.9), "bedl": (42.5, 3.1)},
    },
}

#: ``{dataset: {"gesl" | "bedl": (mean s, std s)}}``: metric learning per fold
PAPER_RUNTIME_S: Dict[str, Dict[str, _E]] = {
    "strings": {"gesl": (0.030, 0.002), "bedl": (1.077, 0.098)},
    "minipalindrome": {"gesl": (0.103, 0.014), "bedl": (2.785, 0.631)},
    "sorting": {"gesl": (0.352, 0.102), "bedl": (3.358, 0.748)},
    "cystic": {"gesl": (0.353, 0.292), "bedl": (0.864, 0.767)},
    "leukemia": {"gesl": (2.208, 0.919), "bedl": (6.550, 2.706)},
    "sentiment": {"bedl": (69.385, 58.064)},
}


def paper_metric_of(metric: str) -> str:
    """The paper's column for a bedl_torch metric (both BEDL modes compare with "bedl")."""
    return "bedl" if metric.startswith("bedl") else metric


def paper_error(dataset: str, classifier: str, metric: str) -> Optional[_E]:
    """``(mean %, std %)`` the paper reports for this cell, or ``None``."""
    return PAPER_ERRORS.get(dataset, {}).get(classifier, {}).get(paper_metric_of(metric))

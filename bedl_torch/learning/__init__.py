"""Learning layer: GLVQ loss and regularisers (:mod:`.losses`), median GLVQ (:mod:`.mglvq`) and
the BEDL estimator (:mod:`.bedl`; its training data, distances and metric-step objective chosen
and built in :mod:`.training`, from the evaluators of :mod:`.objectives` (interface in
:mod:`.objective_base`, numpy forms in :mod:`.numpy_objectives`, across ranks in :mod:`.ranks`);
its state dicts in :mod:`.persistence`), on the shared estimator base (:mod:`.estimator`).

Needs only torch and numpy; scikit-learn is never imported here (the estimators are
compatible with it through :class:`~.estimator.Estimator`).
"""
from .losses import (
    PHI_FUNCTIONS,
    frobenius_regularizer,
    glvq_loss,
    glvq_mu,
    gram_matrix,
    logdet_regularizer,
)
from .mglvq import MedianGLVQ, glvq_likelihood, init_prototypes, median_glvq_em
from .bedl import BEDL, initial_embedding
from .estimator import NotFittedError
from ..costs import CosineCost

__all__ = [
    "glvq_mu",
    "glvq_loss",
    "PHI_FUNCTIONS",
    "logdet_regularizer",
    "frobenius_regularizer",
    "gram_matrix",
    "MedianGLVQ",
    "median_glvq_em",
    "init_prototypes",
    "glvq_likelihood",
    "BEDL",
    "initial_embedding",
    "NotFittedError",
    "CosineCost",
]

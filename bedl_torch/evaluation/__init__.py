"""Evaluation layer: classifiers on distance matrices, the GESL baseline, the paper's
cross-validation protocol and plots. May import scikit-learn and scipy (layers below may not).

Submodules are imported lazily, so ``import bedl_torch.evaluation`` stays cheap.
"""
import importlib

_EXPORTS = {
    "KNNClassifier": "classifiers",
    "SVMClassifier": "classifiers",
    "GoodnessClassifier": "classifiers",
    "clip_eigenvalues": "classifiers",
    "GESL": "gesl",
    "MatrixCost": "gesl",
    "solve_gesl_qp": "gesl",
    "PairFrequencies": "gesl",
    "run_experiment": "protocol",
    "ExperimentConfig": "protocol",
    "format_table": "protocol",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

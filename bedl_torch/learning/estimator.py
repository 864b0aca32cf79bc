"""scikit-learn style estimator parameters, without importing scikit-learn.

:class:`Estimator` is the base of :class:`~bedl_torch.learning.BEDL`,
:class:`~bedl_torch.learning.MedianGLVQ` and :class:`~bedl_torch.evaluation.gesl.GESL`: their
parameters are the keyword arguments of ``__init__``, stored verbatim as attributes of the same
name (the convention ``sklearn.base.clone``, ``GridSearchCV`` and ``cross_val_score`` rely on),
and every ``fit`` starts with the estimator's ``_validate_params``.
"""
from __future__ import annotations

import inspect
import numbers
from typing import Optional, Tuple

import numpy as np

__all__ = ["Estimator", "NotFittedError", "encode_class_labels", "check_random_state", "accuracy"]


class NotFittedError(ValueError, AttributeError):
    """A method that needs ``fit`` was called first (a ValueError and an AttributeError, as
    scikit-learn's ``NotFittedError``)."""


def encode_class_labels(y) -> Tuple[np.ndarray, np.ndarray]:
    """``(classes, class index of every entry)`` of 1-D labels; ValueError for NaN labels
    (a NaN equals no label, itself included, so it would make classes without members)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    if y.dtype.kind in "fc" and bool(np.isnan(y).any()):
        raise ValueError(f"y contains NaN (entry {int(np.flatnonzero(np.isnan(y))[0])}); class labels must "
                         f"compare equal to themselves")
    classes, y_idx = np.unique(y, return_inverse=True)
    return classes, y_idx.reshape(-1)


def accuracy(predicted: np.ndarray, y) -> float:
    """The share of ``predicted`` equal to the labels ``y``; ValueError unless ``y`` is 1-D
    with one label per prediction (numpy would broadcast a single label or a column)."""
    y = np.asarray(y)
    if y.shape != predicted.shape:
        raise ValueError(f"y must be 1-D with {len(predicted)} labels (one per object), got shape {y.shape}")
    return float(np.mean(predicted == y)) if len(y) else float("nan")


def check_random_state(random_state) -> None:
    """``random_state`` is None, an int >= 0 or a :class:`numpy.random.Generator` (what
    :func:`numpy.random.default_rng` takes)."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return
    if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral):
        raise TypeError(f"random_state must be None, an int >= 0 or a numpy Generator, got "
                        f"{type(random_state).__name__}")
    if random_state < 0:
        raise ValueError(f"random_state must be None, an int >= 0 or a numpy Generator, got {random_state}")


class Estimator:
    """``get_params``/``set_params``, ``repr`` and scikit-learn tags from the ``__init__``
    signature, and a hook for checking the parameters.

    Subclasses store each ``__init__`` keyword argument unchanged as an attribute of the same
    name, set :attr:`_estimator_type` (``"classifier"`` for classifiers) and :attr:`_pairwise`
    (whether ``X`` is a precomputed distance matrix), and override :meth:`_validate_params`.
    """

    #: ``"classifier"`` for classifiers (read by scikit-learn through ``__sklearn_tags__``);
    #: ``None`` for other estimators
    _estimator_type: Optional[str] = None
    #: whether ``fit``/``predict`` take a precomputed ``(n_samples, n_train)`` matrix as ``X``
    _pairwise = False

    @classmethod
    def _get_param_names(cls) -> list:
        """The names of the ``__init__`` keyword arguments, sorted."""
        sig = inspect.signature(cls.__init__)
        return sorted(
            name
            for name, p in sig.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator (the ``__init__`` keyword arguments); with ``deep``
        also those of nested estimators, as ``name__sub``."""
        params = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                for key, sub in value.get_params(deep=True).items():
                    params[f"{name}__{key}"] = sub
            params[name] = value
        return params

    def set_params(self, **params):
        """Set parameters (``name=value``; ``name__sub=value`` for nested estimators) and
        return ``self``. Values are checked by the next ``fit``.

        Raises:
            ValueError: a name that is not a parameter (listing the valid ones).
        """
        valid = set(self._get_param_names())
        nested = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {type(self).__name__}. "
                    f"Valid parameters are: {sorted(valid)}."
                )
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def _validate_params(self) -> None:
        """Raise ValueError or TypeError naming a parameter with a bad value; ``fit`` calls it
        first (parameters are stored unchecked, as scikit-learn requires). Default: no checks."""

    def __sklearn_tags__(self):
        # Imported here: only scikit-learn itself calls this method.
        from sklearn.utils import ClassifierTags, InputTags, Tags, TargetTags

        classifier = self._estimator_type == "classifier"
        return Tags(
            estimator_type=self._estimator_type,
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags() if classifier else None,
            input_tags=InputTags(pairwise=self._pairwise, two_d_array=self._pairwise),
            non_deterministic=False,
        )

    def __repr__(self) -> str:
        """``Name(param=value, ...)`` listing the parameters that differ from their defaults."""
        sig = inspect.signature(type(self).__init__)
        parts = []
        for name in self._get_param_names():
            value = getattr(self, name)
            default = sig.parameters[name].default
            try:
                same = value is default or bool(value == default)
            except Exception:  # e.g. tensors or modules
                same = False
            if not same:
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

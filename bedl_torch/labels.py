"""Kinds, labels and alphabets of trees and sequences, and int64 tensors of Python ints.

One place for what the ops, the cost modules, the estimators and the evaluation all need:
whether an object is a tree or a sequence (:func:`kind_of`), its labels (:func:`labels_of`),
the alphabet of one or more collections (:func:`alphabet_of`, :func:`sorted_alphabet`), the
labels a cost module does not know (:func:`missing_labels`) and :func:`long_tensor`.
Layer: trees and data (imports :mod:`bedl_torch.tree` and torch only).
"""
from __future__ import annotations

import array
import collections.abc
import itertools
from typing import Container, Hashable, Iterable, List, Sequence

import torch

from .tree import Tree

__all__ = ["kind_of", "labels_of", "check_collection", "alphabet_of", "sorted_alphabet",
           "missing_labels", "long_tensor"]


def kind_of(obj) -> str:
    """``"tree"`` for a :class:`~bedl_torch.tree.Tree`, ``"sequence"`` for a ``str``, ``list``
    or ``tuple``.

    Raises:
        TypeError: any other object (naming its type).
    """
    if isinstance(obj, Tree):
        return "tree"
    if isinstance(obj, (str, list, tuple)):
        return "sequence"
    raise TypeError(
        f"expected a bedl_torch.Tree or a sequence (str, list or tuple), got {type(obj).__name__}"
    )


def labels_of(obj) -> Sequence[Hashable]:
    """The labels of a tree (``tree.labels``, preorder) or the elements of a sequence (the
    sequence itself, not a copy)."""
    return obj.labels if isinstance(obj, Tree) else obj


def check_collection(X, name: str = "X") -> list:
    """``X`` as a list of trees or of sequences, checked: one kind only.

    Raises:
        TypeError: ``X`` is a single tree or string, a tensor or not iterable, holds anything
            but trees and sequences (naming the type and index), or mixes trees and sequences.
    """
    if isinstance(X, (str, Tree)):
        raise TypeError(f"{name} must be a list of trees or of sequences, not a single "
                        f"{type(X).__name__} (wrap it in a list)")
    if isinstance(X, (torch.Tensor, bytes)) or not isinstance(X, collections.abc.Iterable):
        raise TypeError(f"{name} must be a list of trees or of sequences, got {type(X).__name__}")
    X = list(X)
    kinds = set()
    for i, x in enumerate(X):
        if isinstance(x, Tree):
            kinds.add("tree")
        elif isinstance(x, (str, list, tuple)):
            kinds.add("sequence")
        else:
            raise TypeError(
                f"{name} must hold bedl_torch.Tree objects or sequences (str, list, tuple), "
                f"got {type(x).__name__} at index {i}"
            )
    if len(kinds) > 1:
        raise TypeError(f"{name}: cannot mix trees and sequences in one collection")
    return X


def alphabet_of(*collections: Iterable) -> List[Hashable]:
    """The distinct labels of all objects of the collections, in order of first appearance.

    A collection passed twice (the same object, e.g. ``alphabet_of(X, X)``) is read once; trees
    contribute their cached :meth:`~bedl_torch.tree.Tree.distinct_labels`.

    Raises:
        TypeError: an unhashable label.
    """
    distinct = []
    for objects in collections:
        if not any(objects is seen for seen in distinct):
            distinct.append(objects)
    try:
        return list(dict.fromkeys(itertools.chain.from_iterable(
            o.distinct_labels() if isinstance(o, Tree) else o
            for objects in distinct for o in objects)))
    except TypeError:
        raise TypeError("labels must be hashable") from None


def sorted_alphabet(*collections: Iterable) -> List[Hashable]:
    """The distinct labels sorted, ``None`` (unlabeled nodes) last: an order that does not
    depend on the order of the data. Labels of types that do not compare with each other are
    sorted by ``(type name, repr)``."""
    labels = alphabet_of(*collections)
    has_none = None in labels
    labels = [s for s in labels if s is not None]
    try:
        labels = sorted(labels)
    except TypeError:
        labels = sorted(labels, key=lambda s: (type(s).__name__, repr(s)))
    return labels + ([None] if has_none else [])


def missing_labels(objects: Iterable, known: Container[Hashable]) -> List[Hashable]:
    """The labels of ``objects`` not in ``known``, each once, in order of first appearance."""
    missing = {}
    for obj in objects:
        for label in labels_of(obj):
            if label not in known:
                missing.setdefault(label, None)
    return list(missing)


def long_tensor(values: Iterable[int]) -> torch.Tensor:
    """An int64 CPU tensor ``(n,)`` of Python ints.

    Goes through a typed array: a third of the time of ``torch.tensor`` on a list, which
    matters for the labels and tree sizes of whole collections.
    """
    buffer = array.array("q", values)
    if not len(buffer):
        return torch.zeros(0, dtype=torch.long)
    return torch.frombuffer(buffer, dtype=torch.long)

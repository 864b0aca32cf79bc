"""The protocol's data: the data sets as lists, Sentiment's word sequences and its per-fold
cosine costs."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
import torch

from ...costs import CosineCost
from ...datasets import load, load_glove_subset
from ...labels import alphabet_of
from ...pretrained import pca_reduce

__all__ = ["load_dataset", "leaf_sequence", "SentimentCosts"]


def load_dataset(name: str) -> Tuple[list, np.ndarray]:
    """``(objects, labels)`` of a shipped data set as a list and a numpy array."""
    X, y = load(name)
    return list(X), np.asarray(y)


def leaf_sequence(tree) -> list:
    """The labels of a tree's leaves, left to right (an SST tree's words)."""
    labels = tree.labels
    return [labels[i] for i in tree.leaves()]


def _words(objects) -> List[str]:
    """The words (labels other than ``None``) in order of first appearance."""
    return [w for w in alphabet_of(objects) if w is not None]


class SentimentCosts:
    """Per-fold cosine costs for Sentiment: GloVe vectors of the fold's words, PCA fitted on the
    training sample's words (95% of the variance), out-of-vocabulary words at the zero vector
    (cost 1/2 against any other word, ``GAP_COST`` to insert/delete, see CosineCost).

    Gap and unlabeled inner nodes (the paper leaves them open) sit at the origin: deleting or
    inserting a word costs ``GAP_COST = 1/4`` (``||u - 0||^2 / 4`` for a unit vector ``u``, the
    cosine cost being ``||u - v||^2 / 4``), an unlabeled node costs like the gap (0 to insert or
    delete, 1/4 against a word), so the distance between two SST trees is the edit distance of
    their leaf sequences (for any ``Omega``: a mapping can drop its inner-node pairs at no
    extra cost, and a leaf alignment is a tree mapping); the protocol therefore computes on
    the word sequences by default (``ExperimentConfig.sentiment_leaves``). Why the origin:
    ``docs/notes-learning.md``.
    """

    GAP_COST = 0.25
    UNLABELED = "gap"

    def __init__(self):
        words, vectors = load_glove_subset()
        self.index = {w: i for i, w in enumerate(words)}
        self.vectors = vectors

    def make(self, X_train, X_all):
        """``(CosineCost over the words of X_all with Omega = I, info)``: PCA fitted on the
        GloVe vectors of the training words; ``info`` has the PCA dimension, the word count,
        the out-of-vocabulary count and the gap cost."""
        train_words = [w for w in _words(X_train) if w in self.index]
        alphabet = _words(X_all)
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

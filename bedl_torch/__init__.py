"""bedl_torch: differentiable tree and sequence edit distances and BEDL.

Layers (each imports only those below it): kernels (``bedl_torch._C``), trees and data
(:mod:`bedl_torch.tree`, :mod:`bedl_torch.labels`, :mod:`bedl_torch.datasets`), cost modules
(:mod:`bedl_torch.costs`, :mod:`bedl_torch.pretrained`), ops (:mod:`bedl_torch.ops`), learning
(:mod:`bedl_torch.learning`) and evaluation (:mod:`bedl_torch.evaluation`, which needs
scikit-learn and scipy and is not imported here).
"""
__version__ = "0.1.0"  # the one version source: pyproject.toml reads it

from .tree import Tree
from .costs import CosineCost, EuclideanCost, SymbolCost, UnitCost
from .ops import (
    PairBatch,
    coopt_matrix,
    coopt_matrix_batch,
    default_rel_tol,
    edit_distance,
    edit_distance_batch,
    pairwise_distances,
    pseudo_edit_distance,
    soft_edit_distance,
    soft_edit_distance_batch,
)
from .alignments import edit_script, optimal_mapping, sample_mappings
from .search import NeighborIndex, kneighbors, radius_neighbors
from .learning import BEDL, MedianGLVQ
from . import datasets
from . import pretrained  # noqa: F401 (bedl_torch.pretrained stays an attribute, as before)

__all__ = [
    "Tree",
    "SymbolCost",
    "EuclideanCost",
    "UnitCost",
    "PairBatch",
    "edit_distance",
    "coopt_matrix",
    "pseudo_edit_distance",
    "edit_distance_batch",
    "coopt_matrix_batch",
    "soft_edit_distance",
    "soft_edit_distance_batch",
    "pairwise_distances",
    "kneighbors",
    "NeighborIndex",
    "radius_neighbors",
    "default_rel_tol",
    "optimal_mapping",
    "sample_mappings",
    "edit_script",
    "CosineCost",
    "BEDL",
    "MedianGLVQ",
    "datasets",
]

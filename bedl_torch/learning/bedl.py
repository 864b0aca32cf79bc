"""Embedding edit distance learning (BEDL), Paassen et al., ICML 2018.

The estimator alternates median GLVQ prototype selection with a metric step that learns the
edit costs (a cost module's parameters, by default a symbol embedding) by minimising the GLVQ
loss plus regularisers with L-BFGS. ``fit`` runs named steps: validate, initialise (the cost
module and the training data, :func:`~.training.make_fit_data`), the prototype candidates, the
rounds (training distances, :func:`~.training.train_distances`; median GLVQ; the metric step,
whose objective :class:`~.training.ObjectiveFactory` chooses and builds), keep the best round,
finish. ``loss="nca"`` replaces the GLVQ loss by the soft nearest-neighbour likelihood over the
training objects (:mod:`.nca`): its rounds have no prototype step and it predicts by k-NN.
The state dicts are in :mod:`.persistence`.
Layer: learning (imports the ops, the search, the cost modules, :mod:`bedl_torch.labels` and this package;
never scikit-learn, with which it is compatible through :class:`~.estimator.Estimator`).
"""
from __future__ import annotations

import copy
import math
import time
from typing import Callable, Optional, Union

import numpy as np
import torch

from ..costs import EuclideanCost, SymbolCost, simplex_embedding
from ..labels import check_collection, missing_labels, sorted_alphabet
from ..ops import pairwise_distances
from ..ops.encoding import flat_table
from ..search import kneighbors, radius_neighbors
from ..costs.base import check_cost_module
from ..validation import check_device
from .estimator import Estimator, NotFittedError, accuracy, check_random_state, encode_class_labels
from .mglvq import check_prototype_candidates, kmedoids_pp_candidates
from .nca import NCALossTerms, knn_vote
from .objective_base import LossTerms
from .persistence import bedl_state, dtype_name, load_bedl_state
from .ranks import resolve_ranks
from .rounds import FitRounds
from .training import FitData, ObjectiveFactory, distance_block, make_fit_data

__all__ = ["BEDL", "initial_embedding"]

_REGULARIZERS = ("logdet", "frobenius", "both", None)
_LOSSES = ("glvq", "nca")


def initial_embedding(num_symbols: int, dim: Optional[int] = None, dtype=torch.float64) -> torch.Tensor:
    """The initial ``(num_symbols, dim)`` embedding: the regular simplex with side 1 whose
    remaining vertex is the origin (the gap), so every initial cost is 0 or 1.

    ``dim=None`` or ``dim == num_symbols``: the simplex itself (:func:`simplex_embedding`).
    ``dim < num_symbols``: the simplex projected onto its ``dim`` leading right singular
    vectors (uncentred PCA, which keeps the origin fixed): ``A V[:, :dim]``. The first
    singular vector is the mean direction; the others have equal singular values, so which
    subspace is kept among them is the (deterministic) choice of the SVD routine; the
    projection shrinks some costs below 1. ``dim > num_symbols``: the simplex padded with zero
    columns. Computed in float64, returned contiguous in ``dtype`` on the CPU.

    Raises:
        ValueError: ``dim < 1``.
    """
    A = simplex_embedding(num_symbols, dtype=torch.float64)
    # (.contiguous(): the Cholesky factor is column-major, and the metric step reads and
    # writes the parameters as flat row-major vectors)
    if dim is None or dim == num_symbols:
        return A.to(dtype).contiguous()
    dim = int(dim)
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if dim > num_symbols:
        return torch.cat([A, A.new_zeros(num_symbols, dim - num_symbols)], 1).to(dtype).contiguous()
    _, _, Vh = torch.linalg.svd(A, full_matrices=False)
    return (A @ Vh[:dim].T).to(dtype).contiguous()


class BEDL(FitRounds, Estimator):
    """Embedding edit distance learning: learns edit costs for trees or sequences.

    ``fit(X, y)`` takes a list of :class:`~bedl_torch.tree.Tree` objects or of sequences and
    their class labels; ``predict``/``score``/``decision_distances``/``pairwise_distances``
    use the learned costs (numpy results, computed on ``device``). Why: learned edit costs
    separate classes that unit costs do not, and the prototypes make the classifier cheap.

    Parameters
    ----------
    n_prototypes : int, default 1
        Median GLVQ prototypes per class.
    dim : int or None
        Embedding dimension of the default Euclidean cost; ``None``: ``U`` (alphabet size),
        the simplex initialisation. See :func:`initial_embedding` for ``dim != U``.
    beta : float, default 0.05
        Weight of the regulariser(s), relative to the GLVQ loss ``sum_i Phi(mu_i)`` (a sum,
        not a mean, over the training points; the paper searches ``2 K m [1e-6, 1e-2]``).
    mode : "pseudo", "exact" or "soft"
        ``"pseudo"``: within a metric step the co-optimal matrices ``P0`` of the
        data-prototype pairs are frozen (one ``PairBatch.coopt`` per round, under the costs
        that ``alignments`` names) and distances are ``sum(P0 * C)``; ``"exact"``: the exact
        edit distance at every evaluation; ``"soft"``: the soft edit distance at
        ``temperature`` (smooth in the costs, gradient the expected alignment), with
        prototypes and the kept round still chosen on exact distances.
    max_rounds : int, default 10
        Maximum number of metric steps (prototype selection runs once more after the last).
    max_eval : int, default 200
        L-BFGS gradient evaluations per metric step.
    phi : "log4", "identity", "sigmoid" or callable
        GLVQ squashing function (``"log4"``: the paper's ``log(4 + mu)``).
    regularizer : "logdet", "frobenius", "both" or None, default "both"
        ``"logdet"``: ``-beta log det(G)``, ``G`` the smaller Gram matrix of the embedding,
        which prevents rank collapse. ``"frobenius"``: ``beta ||A||_F^2``. Note that the
        GLVQ loss is invariant to scaling the embedding, so ``"logdet"`` alone is unbounded
        below (it rewards growing the embedding; L-BFGS stops after ``max_eval``) and
        ``"frobenius"`` alone shrinks it; ``"both"`` balances the scale at ``||A||_F^2 = dim``
        (where the simplex starts) and keeps full rank.
    unknown : "error" or "origin"
        Labels not seen in training at prediction time: ``"error"`` raises a ValueError naming
        them, ``"origin"`` maps them to the gap (the origin of the embedding).
    device : None, str or torch.device
        Device of the cost module and of the cost computations (the dynamic programs run on the
        CPU; see :mod:`bedl_torch.ops`).
    dtype : torch.float64 (default) or torch.float32
    cost : None, SymbolCost or callable
        ``None``: :class:`EuclideanCost` with the simplex initialisation. A :class:`SymbolCost`
        instance (copied; its alphabet is used) or a factory ``cost(alphabet) -> SymbolCost``
        called with the training alphabet. All parameters with ``requires_grad`` are learned;
        the regularisers act on ``cost.regularization_matrix()`` if defined, else on
        ``cost.embedding``, else are skipped.
    verbose : bool
        Print one line per round.
    random_state : None or int
        Seed of the prototype candidate choice (``prototype_candidates``; ``None``: 0).
        Initialisation (simplex, class medoids), median GLVQ and L-BFGS are deterministic.
    alignments : "step" (default) or "initial"
        Pseudo mode only: the costs under which the co-optimal alignments ``P0`` of the
        data-prototype pairs are computed for a metric step. ``"step"``: the costs at the start
        of each metric step (the alignments follow the learned costs, as in the authors'
        implementation). ``"initial"``: the initial costs in every round, the literal reading
        of the paper's ``P_{c0}(x_i, w_k)``, which reproduces the paper's Figure 1 more often.
        The first metric step is the same under both; ``docs/notes-learning.md`` compares them.
    process_group : "auto" (default), None or a torch.distributed process group
        Where ``torch.distributed`` is initialised with more than one process (``"auto"``: the
        default group), every rank calls ``fit`` (and ``predict``, the distance methods) with
        the same data and the work is split among the ranks: training distances, co-optimal
        matrices, loss and gradient (see :mod:`.ranks`). Every rank ends with the same model;
        pseudo mode gives the single-process bits, exact and soft mode the single-process
        model up to rounding in the summed gradient. ``None``: this process alone.
    prototype_candidates : None or int
        ``None``: median GLVQ may choose any training point as a prototype, so every round
        computes the ``m x m`` training distances. An int ``M >= n_prototypes``: at most ``M``
        candidates per class, chosen once under the initial costs by k-medoids++ seeding
        (:func:`~bedl_torch.learning.mglvq.kmedoids_pp_candidates`, seeded by
        ``random_state``); every round then needs the ``m x C`` distances to the ``C``
        candidates, which makes training sets of tens of thousands of objects affordable.

    Fitted attributes
    -----------------
    classes_, alphabet_ (list, rows of ``cost_.embedding`` for the Euclidean cost), cost_ (the
    learned cost module), prototypes_ (the prototype training objects), prototype_indices_
    (their indices in the training data), prototype_labels_, loss_history_ (objective,
    i.e. GLVQ loss plus regularisers, at the start of the first metric step and after each
    metric step), actual_loss_history_ (the same objective on actual edit distances with the
    prototypes chosen on them, at each round's start), best_round_ (the round whose state the
    fit returns: the lowest entry of ``actual_loss_history_``; in pseudo mode a metric step
    lowers the surrogate, not necessarily the actual loss), n_rounds_ (metric steps run),
    n_evals_ (L-BFGS evaluations per step), stop_reason_, fit_time_ (seconds), candidates_
    (the training points median GLVQ could choose from). With ``loss="nca"``: prototypes_,
    prototype_indices_ and prototype_labels_ are the references (every training object, or
    the candidates), the histories hold the NCA objective, scale_ is the softmax's ``s``.

    Rounds with ``loss="nca"``: the actual distances to the references (the fit's first fixes
    ``s``), the objective on them, then a metric step (exact mode: L-BFGS on the exact
    objective, restarted each round; pseudo mode: on the pseudo distances of the round's
    frozen alignments). It stops when the objective on actual distances improves by less than
    a relative ``1e-4`` on the previous round (or rises), when a metric step cannot lower its
    objective, or after ``max_rounds``, and keeps the round with the lowest actual objective.

    Alternation (the paper's Section 3.2): per round, the exact learned distances between all
    training points, median GLVQ warm-started from the previous prototypes, then a metric
    step. It stops when the prototypes do not change, when they return to a set seen in an
    earlier round (an oscillation), when a metric step cannot lower its objective, or after
    ``max_rounds`` metric steps. A round that raises the actual loss does not stop it: later
    rounds, with other prototypes, often lower it again. The fit returns the costs of round
    ``best_round_`` with the prototypes median GLVQ chose under those costs.

    Raises
    ------
    ValueError, TypeError
        From ``fit``: a bad parameter (naming it), ``X`` not a list of trees or of sequences,
        ``y`` of the wrong length, fewer than two classes, training labels missing from a
        given cost's alphabet (with ``unknown="error"``), training data that differ between
        the ranks of a process group. From ``predict`` and the distance
        methods: labels not seen in training (with ``unknown="error"``); ``NotFittedError`` (a
        ValueError) when not fitted.
    """

    _estimator_type = "classifier"
    #: L-BFGS memory (torch's default is 100; the problems here have few parameters and a
    #: short history keeps the optimiser's own overhead small)
    _LBFGS_HISTORY = 10
    #: chooses and builds the metric step's objective (a subclass may name its own)
    objective_factory = ObjectiveFactory

    def __init__(
        self,
        n_prototypes: int = 1,
        dim: Optional[int] = None,
        beta: float = 0.05,
        mode: str = "pseudo",
        max_rounds: int = 10,
        max_eval: int = 200,
        phi: Union[str, Callable] = "log4",
        regularizer: Optional[str] = "both",
        unknown: str = "error",
        device=None,
        dtype: torch.dtype = torch.float64,
        cost=None,
        verbose: bool = False,
        random_state=None,
        alignments: str = "step",
        temperature: Optional[float] = None,
        process_group="auto",
        prototype_candidates: Optional[int] = None,
        loss: str = "glvq",
        n_neighbors: int = 1,
        nca_scale: float = 0.25,
        validation_fraction: Optional[float] = None,
    ):
        self.n_prototypes = n_prototypes
        self.dim = dim
        self.beta = beta
        self.mode = mode
        self.max_rounds = max_rounds
        self.max_eval = max_eval
        self.phi = phi
        self.regularizer = regularizer
        self.unknown = unknown
        self.device = device
        self.dtype = dtype
        self.cost = cost
        self.verbose = verbose
        self.random_state = random_state
        self.alignments = alignments
        self.temperature = temperature
        self.process_group = process_group
        self.prototype_candidates = prototype_candidates
        self.loss = loss
        self.n_neighbors = n_neighbors
        self.nca_scale = nca_scale
        self.validation_fraction = validation_fraction

    # -- validation -----------------------------------------------------------

    def _validate_params(self) -> None:
        if not isinstance(self.loss, str) or self.loss not in _LOSSES:
            raise ValueError(f"loss must be 'glvq' or 'nca', got {self.loss!r}")
        k = self.n_neighbors
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"n_neighbors must be an int >= 1, got {k!r}")
        s = self.nca_scale
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not (math.isfinite(s) and s > 0):
            raise ValueError(f"nca_scale must be a finite number > 0, got {s!r}")
        v = self.validation_fraction
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not 0 < v < 1):
            raise ValueError(f"validation_fraction must be None or a number in (0, 1), got {v!r}")
        if self.mode not in ("pseudo", "exact", "soft"):
            raise ValueError(f"mode must be 'pseudo', 'exact' or 'soft', got {self.mode!r}")
        if self.mode == "soft":
            t = self.temperature
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t > 0):
                raise ValueError(f"mode='soft' needs a finite temperature > 0, got {t!r}")
        elif self.temperature is not None:
            raise ValueError(f"temperature is used only with mode='soft', got mode={self.mode!r}")
        if not (self.process_group is None or self.process_group == "auto"
                or not isinstance(self.process_group, str)):
            raise ValueError(f"process_group must be 'auto', None or a process group, got "
                             f"{self.process_group!r}")
        check_prototype_candidates(self.prototype_candidates, self.n_prototypes)
        if self.alignments not in ("initial", "step"):
            raise ValueError(f"alignments must be 'initial' or 'step', got {self.alignments!r}")
        if self.regularizer not in _REGULARIZERS:
            raise ValueError(f"regularizer must be one of {_REGULARIZERS}, got {self.regularizer!r}")
        if self.unknown not in ("error", "origin"):
            raise ValueError(f"unknown must be 'error' or 'origin', got {self.unknown!r}")
        if int(self.n_prototypes) < 1:
            raise ValueError(f"n_prototypes must be >= 1, got {self.n_prototypes}")
        if int(self.max_rounds) < 0 or int(self.max_eval) < 1:
            raise ValueError("max_rounds must be >= 0 and max_eval >= 1")
        if not (self.beta >= 0):
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        dtype_name(self.dtype)
        check_device(self.device)
        check_random_state(self.random_state)

    def _validate_data(self, X, y):
        """``(X as a list, class index of every object, classes)``."""
        X = check_collection(X)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(X):
            raise ValueError(f"y must be 1-D with len(X) = {len(X)} entries, got shape {y.shape}")
        classes, y_idx = encode_class_labels(y)
        if len(classes) < 2:
            raise ValueError("BEDL needs at least two classes")
        return X, y_idx.reshape(-1), classes

    def _torch_device(self) -> torch.device:
        return torch.device(self.device) if self.device is not None else torch.device("cpu")

    def _make_cost(self, alphabet: list) -> SymbolCost:
        """The initial cost module for the training alphabet, on ``device`` and ``dtype``."""
        dtype, device = self.dtype, self._torch_device()
        if self.cost is None:
            emb = initial_embedding(len(alphabet), self.dim, dtype=dtype)
            return EuclideanCost(alphabet, embedding=emb).to(device=device)
        if isinstance(self.cost, SymbolCost):
            check_cost_module(self.cost)
            cost = copy.deepcopy(self.cost)
        elif callable(self.cost):
            cost = self.cost(alphabet)
            if not isinstance(cost, SymbolCost):
                raise TypeError(f"the cost factory returned {type(cost).__name__}, not a SymbolCost")
            check_cost_module(cost)
        else:
            raise TypeError(f"cost must be None, a SymbolCost or a factory, got {type(self.cost).__name__}")
        return cost.to(device=device, dtype=dtype)

    def _unknown_labels(self, X) -> list:
        return missing_labels(X, set(self.cost_.alphabet))

    def _check_known(self, X, what="X", missing_from="seen in training"):
        """ValueError naming unseen labels unless ``unknown='origin'``; returns the ops'
        ``unknown`` argument."""
        if self.unknown == "origin":
            return "gap"
        try:  # every label known: the encoding the distances use (cached for these objects)
            flat_table(X, "Y" if what == "Y" else "X").flat_labels(self.cost_, "error")
            return "error"
        except (ValueError, TypeError):
            pass  # which labels: below
        missing = self._unknown_labels(X)
        if missing:
            shown = ", ".join(repr(s) for s in missing[:10])
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise ValueError(
                f"{what} contains labels not {missing_from}: {shown}{more} "
                "(pass unknown='origin' to map them to the gap)"
            )
        return "error"

    def _loss_terms(self):
        """The loss of the metric step (:class:`NCALossTerms` with a scale that the first round
        sets, for ``loss="nca"``)."""
        if self.loss == "nca":
            return NCALossTerms(self.regularizer, float(self.beta))
        return LossTerms(self.phi, self.regularizer, float(self.beta))

    def _objective(self, d_plus, d_minus, cost) -> torch.Tensor:
        """The GLVQ loss (autograd) for distances to the closest correct and wrong prototypes."""
        return LossTerms(self.phi, self.regularizer, float(self.beta))(d_plus, d_minus, cost)

    # -- fitting --------------------------------------------------------------

    def fit(self, X, y):
        """Learn the edit costs and the prototypes from trees or sequences ``X`` and labels
        ``y``. Returns ``self``."""
        t_start = time.perf_counter()
        self._validate_params()
        for name in ("scale_", "validation_errors_", "kept_initial_", "validation_indices_"):
            self.__dict__.pop(name, None)  # (set by some fits only)
        X, y_idx, classes = self._validate_data(X, y)
        self._ranks = resolve_ranks(self.process_group)
        self._ranks.check_same((X, y_idx.tolist(), classes.tolist()), "the training data")
        alphabet = sorted_alphabet(X)
        fit_idx, held_out = self._hold_out(y_idx)
        if held_out is not None:
            X_all, y_all = X, y_idx
            X, y_idx = [X[i] for i in fit_idx], y_idx[fit_idx]
        cost, params, data = self._initialize(X, y_idx, classes, alphabet)
        self._choose_candidates(data)
        if self.loss == "nca":
            prototypes, best = self._nca_rounds(cost, params, data)
        else:
            prototypes, best = self._alternate(cost, params, data)
        prototypes = self._keep_best_round(params, best, prototypes)
        if held_out is not None:
            prototypes = self._check_against_initial(
                params, data, prototypes, [X_all[i] for i in held_out], y_all[held_out])
        self._finish(data, prototypes)
        if held_out is not None:  # indices into the X given to fit
            self.prototype_indices_ = fit_idx[self.prototype_indices_]
            self.candidates_ = fit_idx[self.candidates_]
            self.validation_indices_ = held_out
        self.__dict__.pop("_first_round", None)
        self.fit_time_ = time.perf_counter() - t_start
        return self

    def _hold_out(self, y_idx: np.ndarray):
        """``(indices of the fit, held-out indices or None)`` for ``validation_fraction``: per
        class a rounded share, at least one object and never all of them."""
        if self.validation_fraction is None:
            return np.arange(len(y_idx)), None
        rng = np.random.default_rng(0 if self.random_state is None else self.random_state)
        held = []
        for c in range(int(y_idx.max()) + 1):
            members = np.flatnonzero(y_idx == c)
            n = min(max(1, int(round(float(self.validation_fraction) * len(members)))),
                    len(members) - 1)
            held.extend(rng.choice(members, n, replace=False).tolist() if n > 0 else [])
        held = np.sort(np.asarray(held, dtype=np.int64))
        return np.setdiff1d(np.arange(len(y_idx)), held), held

    def _check_against_initial(self, params, data: FitData, prototypes, X_val, y_val):
        """``validation_fraction``'s check: the held-out k-NN error under the learned and the
        initial costs (the first round's); the first round's state where the learned is worse.
        Returns the prototypes kept."""
        first = self._first_round
        errors = []
        for state in (first.params, [p.detach().clone() for p in params]):
            with torch.no_grad():
                for p, v in zip(params, state):
                    p.copy_(v)
                D = pairwise_distances(X_val, data.X, self.cost_, unknown="gap").cpu().numpy()
            pred = knn_vote(D, data.y_idx, int(self.n_neighbors), len(data.classes))
            errors.append(100.0 * float(np.mean(pred != y_val)))
        self.validation_errors_ = tuple(errors)
        self.kept_initial_ = errors[1] > errors[0]
        if not self.kept_initial_:
            return prototypes
        if self.verbose:
            print(f"[BEDL] held-out {self.n_neighbors}-NN error {errors[1]:.1f}% > "
                  f"{errors[0]:.1f}% under the initial costs: keep them")
        with torch.no_grad():
            for p, v in zip(params, first.params):
                p.copy_(v)
        self.best_round_ = 0
        return first.prototypes

    def _initialize(self, X, y_idx, classes, alphabet: Optional[list] = None):
        """The initial cost module over the training alphabet (``alphabet``, default that of
        ``X``), its learned parameters and the data the rounds share."""
        cost = self._make_cost(sorted_alphabet(X) if alphabet is None else alphabet)
        self.cost_ = cost
        self.alphabet_ = list(cost.alphabet)
        unknown = "error"
        if self.cost is not None and self._unknown_labels(X):
            unknown = self._check_known(X, "the training data", "in the given cost's alphabet")
        self.classes_ = classes

        # (an empty alphabet has an empty embedding: nothing to learn)
        params = [p for p in cost.parameters() if p.requires_grad and p.numel()]
        with torch.no_grad():
            for p in params:  # the metric step's solver works on them as flat vectors
                if not p.is_contiguous():
                    p.data = p.data.contiguous()
        align_cost = None
        if self.mode == "pseudo" and self.alignments == "initial" and params:
            align_cost = copy.deepcopy(cost).requires_grad_(False)
        data = make_fit_data(X, y_idx, classes, cost, unknown, align_cost, self._loss_terms())
        return cost, params, data

    def _choose_candidates(self, data: FitData) -> None:
        """The prototype candidates (``prototype_candidates``), chosen under the initial costs;
        their distance columns are the first round's."""
        if self.prototype_candidates is not None:
            data.candidates, data.first_D = kmedoids_pp_candidates(
                data.y_idx, int(self.prototype_candidates),
                lambda js: distance_block(data, torch.as_tensor(js), self._fit_ranks()),
                self.random_state)
        self.candidates_ = (np.arange(len(data.X), dtype=np.int64) if data.candidates is None
                            else data.candidates)

    # -- prediction -----------------------------------------------------------

    def _check_fitted(self):
        if not hasattr(self, "cost_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def decision_distances(self, X) -> np.ndarray:
        """``(len(X), n_prototypes_total)`` learned edit distances to the prototypes (with
        ``loss="nca"``: to the references)."""
        self._check_fitted()
        X = check_collection(X)
        unknown = self._check_known(X)
        ranks = resolve_ranks(self.process_group)
        b = ranks.blocks([len(x) for x in X])
        with torch.no_grad():
            D = pairwise_distances(X[b[ranks.rank]: b[ranks.rank + 1]], self.prototypes_,
                                   self.cost_, unknown=unknown)
        D = ranks.gather_rows(D, [b[r + 1] - b[r] for r in range(ranks.size)])
        return D.cpu().numpy()

    def predict(self, X) -> np.ndarray:
        """Label of the closest prototype under the learned distance; with ``loss="nca"`` the
        vote of the ``n_neighbors`` nearest references."""
        D = self.decision_distances(X)
        if self.loss == "nca":
            labels = np.searchsorted(self.classes_, self.prototype_labels_)
            return self.classes_[knn_vote(D, labels, int(self.n_neighbors), len(self.classes_))]
        return self.prototype_labels_[np.argmin(D, axis=1)]

    def score(self, X, y) -> float:
        """Mean accuracy of :meth:`predict`."""
        return accuracy(self.predict(X), y)

    def _learned_inputs(self, X, Y):
        """``X`` and ``Y`` checked, and the ops' ``unknown`` for them (labels unseen in
        training: a ValueError naming them unless ``unknown='origin'``)."""
        self._check_fitted()
        X = check_collection(X)
        unknown = self._check_known(X)
        if Y is not None:
            Y = check_collection(Y, "Y")
            unknown = self._check_known(Y, "Y") if unknown == "error" else unknown
        return X, Y, unknown

    def distance_kwargs(self, X, Y=None) -> dict:
        """The arguments ``cost`` and ``unknown`` with which the library's distance functions
        (:func:`bedl_torch.pairwise_distances`, :func:`bedl_torch.kneighbors`,
        :mod:`bedl_torch.distributed`, ...) give this model's learned distances between X and Y
        (Y=None: X), e.g. ``bedl_torch.distributed.pairwise_distances(X, out="D.npy",
        **model.distance_kwargs(X))``.

        Raises:
            ValueError: the model is not fitted; X or Y holds labels not seen in training
                (unless the model was fitted with ``unknown='origin'``: they map to the gap).
        """
        return {"cost": self.cost_, "unknown": self._learned_inputs(X, Y)[2]}

    def _learned(self, op: str, X, Y, **kwargs):
        """``op`` (``"pairwise_distances"``, ``"kneighbors"`` or ``"radius_neighbors"``) of X and
        Y under the learned costs, without gradient: :mod:`bedl_torch`'s, or across the ranks of
        ``process_group`` :mod:`bedl_torch.distributed`'s (the same answer)."""
        X, Y, unknown = self._learned_inputs(X, Y)
        ranks = resolve_ranks(self.process_group)
        with torch.no_grad():
            if ranks.size > 1:
                from .. import distributed

                if op == "pairwise_distances":
                    kwargs["progress"] = False
                return getattr(distributed, op)(X, Y, cost=self.cost_, unknown=unknown,
                                                group=ranks.group, **kwargs)
            local = {"pairwise_distances": pairwise_distances, "kneighbors": kneighbors,
                     "radius_neighbors": radius_neighbors}[op]
            return local(X, Y, cost=self.cost_, unknown=unknown, **kwargs)

    def pairwise_distances(self, X, Y=None) -> np.ndarray:
        """Learned edit distances ``(len(X), len(Y))`` as a numpy array (``Y=None``: X)."""
        return torch.as_tensor(self._learned("pairwise_distances", X, Y)).cpu().numpy()

    def kneighbors(self, X, Y=None, *, k: int):
        """The ``k`` nearest objects of ``Y`` (of ``X`` itself when ``Y`` is None, each object
        left out of its own list) under the learned distance, exactly and without the whole
        matrix (:func:`bedl_torch.kneighbors`; shared among the ranks of ``process_group``).

        Returns:
            ``(distances, indices)``: float64 and int64 numpy arrays ``(len(X), k)``, each row
            sorted by distance, then index: the rows of :meth:`pairwise_distances` sorted.
        """
        return tuple(t.numpy() for t in self._learned("kneighbors", X, Y, k=k))

    def radius_neighbors(self, X, Y=None, *, radius: float):
        """Every pair of an object of ``X`` and one of ``Y`` (of ``X`` itself when ``Y`` is None,
        without the pairs of an object with itself) within ``radius`` under the learned
        distance, exactly and without the whole matrix (:func:`bedl_torch.radius_neighbors`;
        shared among the ranks of ``process_group``).

        Returns:
            ``(rows, cols, distances)``: 1-D int64, int64 and float64 numpy arrays, sorted by
            row, then column.
        """
        return tuple(t.numpy() for t in self._learned("radius_neighbors", X, Y, radius=radius))

    # -- persistence ----------------------------------------------------------

    def state_dict(self) -> dict:
        """A plain dict (tensors, str, numbers, lists, dicts) with everything needed to predict.

        Loadable with ``torch.load(path, weights_only=True)``. Custom cost modules are stored
        by class name and ``state_dict()``; reloading them needs ``cost=`` (see :meth:`load`).
        """
        self._check_fitted()
        return bedl_state(self)

    def load_state_dict(self, state: dict, cost=None):
        """Restore a fitted model from :meth:`state_dict`. ``cost``: a ``SymbolCost`` (or a
        factory ``cost(alphabet)``) to load a custom cost module's state into; not needed for
        :class:`EuclideanCost` and :class:`~bedl_torch.costs.CosineCost`. The model's own
        ``device``, where given, wins over the saved one. Returns ``self``."""
        return load_bedl_state(self, state, cost)

    def save(self, path) -> None:
        """``torch.save`` of :meth:`state_dict` (plain data; no pickled code)."""
        torch.save(self.state_dict(), path)

    @classmethod
    def load(cls, path, cost=None, map_location="cpu", device=None) -> "BEDL":
        """Load a model saved with :meth:`save` (``torch.load(..., weights_only=True)``).
        ``device`` overrides the saved device."""
        state = torch.load(path, map_location=map_location, weights_only=True)
        model = cls()
        if device is not None:
            state = dict(state)
            state["hyperparameters"] = dict(state["hyperparameters"], device=str(device))
        return model.load_state_dict(state, cost=cost)

"""Second derivatives through edit distances (``create_graph=True``): Hessian-vector products
of a loss of exact distances equal those of the same loss with every pair's P frozen (P is
piecewise constant in the costs), whichever op computes the distances; soft distances, whose
expected alignment moves with the costs, refuse instead of dropping that term."""
import numpy as np
import pytest
import torch

import bedl_torch
from bedl_torch.tree import Tree
from oracles import random_tree

ALPHABET = list("abc")


class SmoothEmbeddingCost(bedl_torch.SymbolCost):
    """Costs smooth and nonlinear in an embedding (so that second derivatives do not vanish),
    read by indexing: the test can build every pair's cost matrix by hand."""

    def __init__(self, embedding):
        super().__init__(ALPHABET)
        self.embedding = embedding

    def table(self):
        E = torch.cat([self.embedding, torch.zeros(1, self.embedding.shape[1], dtype=self.embedding.dtype)])
        diff = E[:, None, :] - E[None, :, :]
        return ((diff * diff).sum(-1) + 0.25).sqrt()

    def forward(self, x_idx, y_idx):
        return self.table()[x_idx[..., :, None], y_idx[..., None, :]]


def _objects(trees, rng, count):
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 7))
        out.append(Tree(*random_tree(n, ALPHABET, rng)) if trees
                   else "".join(rng.choice(ALPHABET, size=n)))
    return out


def _pair_costs(table, x, y):
    labels = (lambda o: list(o.labels) if isinstance(o, Tree) else list(o))
    rows = [ALPHABET.index(a) for a in labels(x)] + [len(ALPHABET)]
    cols = [ALPHABET.index(b) for b in labels(y)] + [len(ALPHABET)]
    return table[rows][:, cols]


def _frozen_p_distances(embedding, pairs, P):
    """sum(P_k * C_k(embedding)) with every P_k fixed: the exact distances near the point
    where P was taken, as plain differentiable torch."""
    table = SmoothEmbeddingCost(embedding).table()
    return torch.stack([(p * _pair_costs(table, x, y)).sum() for (x, y), p in zip(pairs, P)])


def _hvp(distances_of, embedding, v):
    e = embedding.clone().requires_grad_()
    D = distances_of(e)
    loss = (D * D).sum() + D.sum()  # a nonlinear loss: Gauss-Newton terms matter
    g, = torch.autograd.grad(loss, e, create_graph=True)
    hv, = torch.autograd.grad((g * v).sum(), e)
    return hv


@pytest.mark.parametrize("trees", [True, False], ids=["trees", "sequences"])
@pytest.mark.parametrize("api", ["pairwise", "batch_module", "batch_tensors", "single"])
def test_exact_hessian_vector_products_equal_the_frozen_p_ones(trees, api):
    """Before, the symbol-table path detached the backward's weights: a Hessian-vector product
    of exact distances silently lost every term through them."""
    rng = np.random.default_rng(3906)
    X = _objects(trees, rng, 5)
    embedding = torch.tensor(rng.normal(size=(3, 2)), dtype=torch.float64)
    v = torch.tensor(rng.normal(size=(3, 2)), dtype=torch.float64)
    pairs = [(X[i], X[j]) for i in range(len(X)) for j in range(len(X))]
    table0 = SmoothEmbeddingCost(embedding).table()
    P = [bedl_torch.coopt_matrix(x, y, _pair_costs(table0, x, y))[1] for x, y in pairs]

    def exact(e):
        cost = SmoothEmbeddingCost(e)
        xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
        if api == "pairwise":
            return bedl_torch.pairwise_distances(X, cost=cost).reshape(-1)
        if api == "batch_module":
            return bedl_torch.edit_distance_batch(xs, ys, cost)
        table = cost.table()
        costs = [_pair_costs(table, x, y) for x, y in pairs]
        if api == "batch_tensors":
            return bedl_torch.edit_distance_batch(xs, ys, costs)
        return torch.stack([bedl_torch.edit_distance(x, y, c) for x, y, c in zip(xs, ys, costs)])

    want = _hvp(lambda e: _frozen_p_distances(e, pairs, P), embedding, v)
    got = _hvp(exact, embedding, v)
    assert float(want.abs().max()) > 1.0  # the terms through the weights are there to lose
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_soft_distances_refuse_a_second_derivative():
    c = torch.rand(3, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="second derivatives of soft edit distances are not implemented"):
        torch.autograd.grad(bedl_torch.soft_edit_distance("ab", "ba", c, 0.5), c, create_graph=True)
    cost = SmoothEmbeddingCost(torch.randn(3, 2, dtype=torch.float64, requires_grad=True))
    D = bedl_torch.pairwise_distances(["ab", "ca"], cost=cost, mode="soft", temperature=0.5)
    with pytest.raises(RuntimeError, match="second derivatives of soft edit distances"):
        torch.autograd.grad(D.sum(), cost.embedding, create_graph=True)
    # first derivatives as before
    g, = torch.autograd.grad(bedl_torch.soft_edit_distance("ab", "ba", c, 0.5), c)
    assert g.shape == c.shape and bool(torch.isfinite(g).all())

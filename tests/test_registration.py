"""The kernels as torch operators: schemas, fake implementations (opcheck), and torch.compile
of user code that calls the ops, against eager."""
import warnings

import pytest
import torch

import bedl_torch
from bedl_torch import _ext
from bedl_torch.costs import EuclideanCost
from bedl_torch.ops import PairBatch
from bedl_torch.tree import Tree

XS = [Tree.from_bracket(b) for b in ("{a{b}{c}}", "{a{b{c}}}", "{b}")]
YS = [Tree.from_bracket(b) for b in ("{a{c}}", "{c{a}{b}{a}}", "{a}")]


def _tree_args(need_coopt, dtype=torch.float64):
    batch = PairBatch(XS, YS)
    costs = torch.rand(len(XS), batch.rows, batch.cols, dtype=dtype, generator=torch.Generator().manual_seed(0))
    return (costs, batch.x_table.sizes, batch.x_table.ptr, batch.y_table.sizes, batch.y_table.ptr,
            batch.pair_x, batch.pair_y, need_coopt, 1e-9)


def _sequence_args(need_coopt):
    costs = torch.rand(2, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    return costs, torch.tensor([3, 2]), torch.tensor([4, 1]), need_coopt, 1e-9


def _symbol_args(kind, need_coopt):
    # rectangular: three x symbols and four y symbols, each side's gap last
    table = torch.rand(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    labels, y_labels = torch.tensor([0, 1, 2, 1, 0, 2]), torch.tensor([3, 1, 2, 3, 0, 2])
    ptr = torch.tensor([0, 3, 6])
    pair = torch.tensor([0, 1, 1])
    if kind == "tree":
        sizes = torch.tensor([3, 1, 1, 3, 2, 1])
        return table, labels, sizes, ptr, y_labels, sizes, ptr, pair, pair.flip(0), need_coopt, 1e-9
    return table, labels, ptr, y_labels, ptr, pair, pair.flip(0), need_coopt, 1e-9


@pytest.mark.parametrize("need_coopt", [False, True])
@pytest.mark.parametrize("op, args", [
    ("ted", _tree_args), ("sed", _sequence_args),
    ("ted_symbols", lambda c: _symbol_args("tree", c)), ("sed_symbols", lambda c: _symbol_args("seq", c)),
])
def test_opcheck(op, args, need_coopt):
    utils = ["test_schema", "test_autograd_registration", "test_faketensor"]
    if not (need_coopt and op.endswith("_symbols")):  # P's padded shape depends on the data there
        utils.append("test_aot_dispatch_dynamic")
    torch.library.opcheck(getattr(torch.ops.bedl_torch, op).default, args(need_coopt), test_utils=utils)


def test_operators_are_the_kernels():
    d, P = torch.ops.bedl_torch.ted(*_tree_args(True))
    for k, (x, y) in enumerate(zip(XS, YS)):
        C = _tree_args(True)[0][k, : len(x) + 1, : len(y) + 1]
        d_k, P_k = bedl_torch.coopt_matrix(x, y, C)
        assert float(d[k]) == float(d_k) and torch.equal(P[k, : len(x) + 1, : len(y) + 1], P_k)
    assert _ext.ted_cpu is torch.ops.bedl_torch.ted


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_of_user_code_matches_eager(backend):
    """A user's function around edit_distance, soft_edit_distance and pairwise_distances,
    compiled: same values and gradients as eager (the tree handling runs in Python; the graph
    around it compiles). Under torch 2.11 a no-op ``.to()`` inside the autograd functions'
    forward dropped the costs' gradient (ops.batch._moved)."""
    torch._dynamo.reset()
    x, y = XS[0], YS[1]
    base = torch.rand(len(x) + 1, len(y) + 1, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    cost = EuclideanCost(["a", "b", "c"])

    def loss(weight):
        costs = (base * weight).exp()
        d = bedl_torch.edit_distance(x, y, costs)
        soft = bedl_torch.soft_edit_distance(x, y, costs, temperature=0.5)
        D = bedl_torch.pairwise_distances(XS, YS, cost=cost)
        return d * weight.sum() + soft * weight[0] + D.square().sum()

    w_eager = torch.linspace(0.5, 1.5, len(y) + 1, dtype=torch.float64).requires_grad_(True)
    w_comp = w_eager.detach().clone().requires_grad_(True)
    eager = loss(w_eager)
    eager.backward()
    grad_emb_eager = cost.embedding.grad.clone()
    cost.embedding.grad = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(loss, backend=backend)(w_comp)
    compiled.backward()
    # the library's caches stay out of the compiled code (Dynamo warned that it skips them)
    assert not [w for w in caught if "lru_cache" in str(w.message)]
    assert torch.allclose(compiled, eager, rtol=1e-12, atol=0)
    assert torch.allclose(w_comp.grad, w_eager.grad, rtol=1e-12, atol=0)
    assert torch.allclose(cost.embedding.grad, grad_emb_eager, rtol=1e-12, atol=0)


def _symbol_grad_args(kind):
    args = list(_symbol_args(kind, False)[:-2])  # without need_coopt, rel_tol
    weights = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    return (*args, weights, 1e-9)


@pytest.mark.parametrize("op, kind", [("ted_symbols_grad", "tree"), ("sed_symbols_grad", "seq")])
def test_opcheck_symbol_grad(op, kind):
    torch.library.opcheck(getattr(torch.ops.bedl_torch, op).default, _symbol_grad_args(kind),
                          test_utils=["test_schema", "test_autograd_registration", "test_faketensor",
                                      "test_aot_dispatch_dynamic"])
    assert getattr(_ext, f"{op}_cpu") is getattr(torch.ops.bedl_torch, op)


@pytest.mark.parametrize("kind", ["tree", "seq"])
def test_opcheck_symbol_sums(kind):
    args = list(_symbol_args(kind, False)[:-2])
    op = getattr(torch.ops.bedl_torch, "ted_symbols_sums" if kind == "tree" else "sed_symbols_sums")
    utils = ["test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"]
    for max_entries in (1 << 20, 0):  # the lists, or none
        torch.library.opcheck(op.default, (*args, 1e-9, max_entries), test_utils=utils)
    d, ptr, entry, value = op(*args, 1e-9, 1 << 20)
    weights = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    torch.library.opcheck(torch.ops.bedl_torch.weighted_pair_sums.default, (ptr, entry, value, weights, 4, 5),
                          test_utils=utils)

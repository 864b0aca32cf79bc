"""Fuzzing of every public entry point with hypothesis.

Random trees (single nodes, deep paths, wide stars, random shapes), sequences (str, lists and
tuples of hashable labels), cost tensors (float32/float64, right and wrong shapes, tiny, huge,
negative and zero values, NaN/inf, transposed, strided and expanded views), cost modules and
odd data go through the tree readers, the ops (exact, pseudo and soft distances), PairBatch,
pairwise_distances, the alignments' mappings, the cost modules, the search (kneighbors,
radius_neighbors, NeighborIndex, their distributed forms), BEDL and MedianGLVQ.

Properties: only ValueError and TypeError are raised (and SyntaxError by ``Tree.from_python``
on invalid source); valid inputs with finite costs succeed and give finite results; ``P`` has
the costs' shape and dtype, entries in [0, 1], every node of x is replaced or deleted
(``sum_j P[i, j] + P[i, n] == 1``) and every node of y replaced or inserted (columns likewise),
``P[m, n] == 0`` and ``d == sum(P * C)``; the gradient of the distance is P; the soft distance
lies within ``T (|x| + |y|) log 2`` below d and its gradient is an alignment; optimal and sampled
mappings are valid and cost d; batches agree with single pairs; sequence distances agree with
the plain dynamic program below, tiny trees with the forest recursion of ``oracles.py``; the
search gives the matrix's answer bit for bit, or the matrix's error.

The environment tunes the run (``tools/fuzz.py`` sets it for the long campaign; ``make test``
runs the short default, the same examples every run):

* ``BEDL_FUZZ_EXAMPLES``: examples per test (default 40).
* ``BEDL_FUZZ_SEED``: hypothesis seed (default: derandomized).
* ``BEDL_FUZZ_TRACE``: a file that receives each input, written before it runs, so that the
  input of a crash (segfault, abort) can be named.
* ``BEDL_FUZZ_HUGE_COSTS=0``: leave out cost magnitudes whose path sums come near overflow
  (``(|x| + |y| + 2) max|c|`` above 1e300 in float64 or 1e36 in float32). By default they are
  drawn, in about a quarter of the cost tensors, up to the largest float and exactly at the
  kernels' overflow rule (``2 (|x| + |y|) max|c|`` at most the dtype's largest value, ``[m, n]``
  unused): costs that satisfy it must give finite results, the others a ValueError.
"""
import ast
import json
import math
import os
import tempfile
from unittest import mock

import numpy as np
import torch
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

import bedl_torch
import bedl_torch.distributed
from bedl_torch import BEDL, MedianGLVQ, PairBatch, Tree, ops
from bedl_torch.alignments import mapping_cost, optimal_mapping, sample_mappings
from bedl_torch.costs import subtable_of
from bedl_torch.evaluation.gesl import MatrixCost
from bedl_torch.search import label_bound as search_label_bound
from bedl_torch.search import problem as search_problem
from oracles import forest_recursion, sequence_reference

EXAMPLES = int(os.environ.get("BEDL_FUZZ_EXAMPLES", "40"))
SEED = os.environ.get("BEDL_FUZZ_SEED")
TRACE = os.environ.get("BEDL_FUZZ_TRACE")
HUGE_COSTS = os.environ.get("BEDL_FUZZ_HUGE_COSTS", "1") != "0"

#: Largest (|x| + |y| + 2) * max|c| of the costs drawn as ordinary ones.
SAFE_PATH_SUM = {torch.float64: 1e300, torch.float32: 1e36}

#: How many times each test's body ran in this process (tools/fuzz.py reports the totals).
COUNTS = {}

_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=SEED is None,
    report_multiple_bugs=False,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)


def fuzz(test):
    """The profile of this module (and the campaign's seed, if one is set)."""
    test = _SETTINGS(test)
    return seed(int(SEED))(test) if SEED is not None else test


CONTRACT = (ValueError, TypeError)


def rarely(one_in):
    """True in about one of ``one_in`` draws (shrinking towards False: hypothesis favours the
    bounds of a range, so the rare value is an inner one)."""
    return st.integers(0, one_in - 1).map(lambda k: k == one_in // 2)


def mostly(usual, odd):
    """``usual`` in about seven of eight draws, else one of the values ``odd``."""
    return rarely(8).flatmap(lambda odd_one: st.sampled_from(odd) if odd_one else st.just(usual))


def attempt(call, allowed=CONTRACT, label="call"):
    """``(True, result)`` or ``(False, error)`` for an allowed error; any other exception
    propagates and fails the test. The outcome is a hypothesis event (shown by
    ``--hypothesis-show-statistics``), to see how many examples get through."""
    try:
        result = call()
    except allowed as error:
        event(f"{label}: {type(error).__name__}: {str(error)[:30]}")
        return False, error
    event(f"{label}: ok")
    return True, result


# ---------------------------------------------------------------------------- inputs on record
def describe(obj, budget=1024):
    """Python text that rebuilds ``obj`` (tensors in full up to ``budget`` elements)."""
    if isinstance(obj, float):
        return repr(obj) if math.isfinite(obj) else f"float('{obj}')"
    if isinstance(obj, Tree):
        return repr(obj)
    if isinstance(obj, torch.Tensor):
        head = f"dtype={obj.dtype}, shape={tuple(obj.shape)}"
        if obj.layout != torch.strided or obj.device.type == "meta" or obj.is_quantized:
            return f"<tensor {head}, layout={obj.layout}, device={obj.device}>"
        head += f", stride={obj.stride()}, requires_grad={obj.requires_grad}"
        if obj.numel() > budget:
            return f"<tensor {head}, sum={float(obj.detach().double().sum())!r}>"
        return f"torch.tensor({describe(obj.detach().tolist())}, dtype={obj.dtype})  # {head}"
    if isinstance(obj, list):
        return "[" + ", ".join(describe(v, budget) for v in obj) + "]"
    if isinstance(obj, tuple):
        return "(" + "".join(describe(v, budget) + ", " for v in obj) + ")"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{describe(k)}: {describe(v, budget)}" for k, v in obj.items()) + "}"
    if isinstance(obj, torch.nn.Module):
        tensors = {k: describe(v, budget) for k, v in
                   list(obj.named_parameters()) + list(obj.named_buffers())}
        return f"<{type(obj).__name__} alphabet={getattr(obj, 'alphabet', None)!r} {tensors}>"
    if isinstance(obj, np.ndarray):
        return f"np.array({describe(obj.tolist())}, dtype={obj.dtype})"
    return repr(obj)


def record(entry, **inputs):
    """Count an example of ``entry``; with BEDL_FUZZ_TRACE, write its inputs there first."""
    COUNTS[entry] = COUNTS.get(entry, 0) + 1
    if TRACE:
        text = "\n".join(f"{k} = {describe(v)}" for k, v in inputs.items())
        with open(TRACE, "w") as f:
            f.write(f"# {entry}, input {sum(COUNTS.values())} of this process\n{text}\n")


# ---------------------------------------------------------------------------- structures
labels = st.one_of(st.sampled_from("abcd"), st.integers(-2, 2), st.none(),
                   st.text(max_size=3), st.tuples(st.sampled_from("ab")))


@st.composite
def trees(draw, max_nodes=30, label=labels):
    """A tree: a single node, a deep path, a wide star, or a random shape (every node the new
    last child of a node on the rightmost path, which keeps the preorder numbering)."""
    shape = draw(st.sampled_from(["random", "random", "single", "path", "star"]))
    if shape == "single":
        n = 1
    elif shape in ("path", "star"):
        n = draw(st.integers(1, 5 * max_nodes))
    else:
        n = draw(st.integers(1, max_nodes))
    names = draw(st.lists(label, min_size=n, max_size=n)) if n <= 4 * max_nodes else \
        [draw(label)] * n
    children = [[] for _ in range(n)]
    if shape == "path":
        for i in range(n - 1):
            children[i].append(i + 1)
    elif shape == "star":
        children[0] = list(range(1, n))
    else:
        stack = [0]
        for k in range(1, n):
            depth = draw(st.integers(0, len(stack) - 1))
            del stack[depth + 1:]
            children[stack[depth]].append(k)
            stack.append(k)
    return Tree(names, children)


def sequences(max_len=30, label=None):
    """Sequences: strings, lists and tuples (of ``label``, default: any labels, and strings
    over 'abcd' up to ten times ``max_len`` long)."""
    if label is not None:
        return st.one_of(st.lists(label, max_size=max_len),
                         st.lists(label, max_size=max_len).map(tuple))
    return st.one_of(
        st.text(alphabet="abcd", max_size=max_len),
        st.lists(labels, max_size=max_len),
        st.lists(labels, max_size=max_len).map(tuple),
        st.integers(0, 10 * max_len).map(lambda n: "ab" * (n // 2) + "c" * (n % 2)),
    )


def structures(max_nodes=30):
    return st.one_of(trees(max_nodes), sequences(max_nodes))


@st.composite
def pairs(draw, max_nodes=30):
    """Two trees or two sequences."""
    if draw(st.booleans()):
        return draw(trees(max_nodes)), draw(trees(max_nodes))
    return draw(sequences(max_nodes)), draw(sequences(max_nodes))


# ---------------------------------------------------------------------------- cost tensors
def cost_cap(dtype, path, huge=False):
    """The largest cost magnitude drawn for paths of ``path`` steps (``huge``: the largest
    value of the dtype)."""
    if huge:
        return float(torch.finfo(dtype).max)
    return SAFE_PATH_SUM[dtype] / (path + 2)


def overflow_bounds(dtype, path):
    """The largest magnitude the overflow rule allows for ``path`` costs on a path, and its
    neighbours in the dtype (the rule's edge)."""
    bound = torch.tensor(float(torch.finfo(dtype).max) / (2.0 * max(path, 1)), dtype=dtype)
    neighbours = [torch.nextafter(bound, torch.tensor(v, dtype=dtype)) for v in (0.0, math.inf)]
    return [float(v) for v in [bound] + neighbours]


def fits(C, m, n):
    """The kernels' overflow rule for a pair's costs: ``2 (m + n) max|c| <= max`` of the dtype,
    ``max|c|`` over the block the dynamic program reads (not ``[m, n]``), in float64."""
    block = C.detach().double()[:m + 1, :n + 1].clone()
    block[m, n] = 0.0
    max_abs = float(block.abs().max())
    return 2.0 * float(m + n) * max_abs <= float(torch.finfo(C.dtype).max)


@st.composite
def cost_values(draw, shape, dtype, path, huge=None):
    """A float64 tensor of the given shape, from a seeded generator (so large tensors stay cheap
    to draw), scaled from 0 and denormals up to the cap, with a few special finite entries.
    ``huge`` (default: in about a quarter of the draws where HUGE_COSTS is on): magnitudes up
    to the dtype's largest value, and the edge of the overflow rule for ``path``."""
    if huge is None:
        huge = HUGE_COSTS and draw(rarely(4))
    cap = cost_cap(dtype, path, huge)
    tiny = float(torch.finfo(dtype).tiny) * float(torch.finfo(dtype).eps)  # smallest denormal
    scales = [s for s in (0.0, tiny, 1e-300, 1e-30, 1e-6, 1.0, 1.0, 1e3, 1e15, 1e30, 1e100, 1e300)
              if s <= cap and (s == 0.0 or s >= tiny)] + [cap]
    scale = draw(st.sampled_from(scales))
    kind = draw(st.sampled_from(["uniform", "signed", "integers", "constant", "zeros"]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    if kind == "uniform":
        base = torch.rand(shape, generator=gen, dtype=torch.float64)
    elif kind == "signed":
        base = 2.0 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1.0
    elif kind == "integers":
        base = torch.randint(0, 3, shape, generator=gen).double() / 2.0
    elif kind == "constant":
        base = torch.ones(shape, dtype=torch.float64)
    else:
        base = torch.zeros(shape, dtype=torch.float64)
    C = base * scale
    specials = [0.0, -0.0, tiny, -tiny, 1.0, cap, -cap]
    if huge:
        specials += overflow_bounds(dtype, path)
    flat = C.view(-1)
    for pos, value in draw(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(specials)),
                                    max_size=3)):
        if flat.numel():
            flat[pos % flat.numel()] = value
    return C


def with_layout(C, layout):
    """``C`` (float, any dtype) as a contiguous tensor or a view with the same values."""
    if layout == "transposed" and C.dim() == 2:
        return C.t().contiguous().t()
    if layout == "strided":
        big = torch.zeros(tuple(2 * s for s in C.shape), dtype=C.dtype)
        view = big[tuple(slice(None, None, 2) for _ in C.shape)]
        view.copy_(C)
        return view
    if layout == "offset" and C.dim() == 2:
        big = torch.zeros(C.shape[0] + 1, C.shape[1] + 2, dtype=C.dtype)
        big[1:, 2:] = C
        return big[1:, 2:]
    if layout == "expanded" and C.dim() == 2 and C.numel():
        return C[:1, :1].expand(C.shape)
    return C.contiguous()


@st.composite
def costs_for(draw, m, n, allow_bad=True):
    """``(C, errors)``: a cost tensor for a pair with m and n nodes and the errors it must raise
    (an empty tuple where it is valid)."""
    dtype = draw(st.sampled_from([torch.float64, torch.float32]))
    shape = (m + 1, n + 1)
    errors = ()
    if allow_bad and draw(rarely(8)):
        shape = draw(st.sampled_from([(m, n + 1), (m + 1, n), (n + 1, m + 1), (m + 2, n + 1),
                                      (m + 1, n + 2), (m + 1,), (1, m + 1, n + 1), ()]))
        if shape != (m + 1, n + 1):
            errors = (ValueError,)
    layout = draw(st.sampled_from(["contiguous", "contiguous", "transposed", "strided",
                                   "offset", "expanded"]))
    values = draw(cost_values(shape, dtype, m + n))
    C = with_layout(values.to(dtype), layout)
    if allow_bad and C.numel() and draw(rarely(8)):
        bad = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        C = C.contiguous()
        C.view(-1)[draw(st.integers(0, C.numel() - 1))] = bad
        errors = (ValueError,)
    if allow_bad and draw(rarely(16)):
        C = C.to(draw(st.sampled_from([torch.float16, torch.bfloat16, torch.int64, torch.bool,
                                       torch.complex64])))
        errors = (TypeError, ValueError)
    if draw(st.booleans()) and C.is_floating_point():
        C = C.detach().clone().requires_grad_(True) if layout == "contiguous" else \
            C.requires_grad_(True)
    return C, errors


# ---------------------------------------------------------------------------- invariants
def rel_tol(dtype):
    return bedl_torch.default_rel_tol(dtype)


def scale_of(C):
    """Sum of |C| in float64: bounds every path cost and every cost magnitude."""
    return float(C.detach().double().abs().sum())


def d_tolerance(C, m, n):
    """How far a distance may lie from the sum of costs along P: ties within the relative
    tolerance at each of at most m + n + 2 steps, and rounding, down to denormal costs."""
    finfo = torch.finfo(C.dtype)
    return (m + n + 2) * (rel_tol(C.dtype) * scale_of(C) + finfo.tiny * finfo.eps)


def soft_tolerance(C, m, n, T, value):
    """d_tolerance, plus rounding of a soft distance ``value``: the log-sum-exp over up to
    2^(m + n) mappings at temperature T, in C's dtype."""
    eps = float(torch.finfo(C.dtype).eps)
    return d_tolerance(C, m, n) + (m + n + 2) * eps * (abs(value) + T * (m + n + 1))


def check_alignment(P, m, n):
    """An (expected) alignment: finite, entries in [0, 1], every node of x replaced or deleted
    and every node of y replaced or inserted once (rows and columns sum to 1), [m, n] = 0."""
    assert torch.isfinite(P).all(), "non-finite result"
    P64 = P.double()
    atol = 1e-9 if P.dtype == torch.float64 else max(1e-5, 1e-6 * (max(m, n) + 1))
    assert P64[m, n] == 0
    assert (P64 >= -atol).all() and (P64 <= 1 + atol).all(), P64
    if m:
        assert torch.allclose(P64[:m].sum(1), torch.ones(m, dtype=torch.float64), rtol=0,
                              atol=atol), P64[:m].sum(1)
    if n:
        assert torch.allclose(P64[:, :n].sum(0), torch.ones(n, dtype=torch.float64), rtol=0,
                              atol=atol), P64[:, :n].sum(0)


def check_coopt(C, m, n, d, P):
    """The invariants of a distance ``d`` and co-optimal matrix ``P`` for costs ``C``."""
    d = d.detach()
    assert P.shape == C.shape and P.dtype == C.dtype, (P.shape, P.dtype, C.shape, C.dtype)
    assert torch.isfinite(d) and torch.isfinite(P).all(), "non-finite result"
    check_alignment(P, m, n)
    P64, C64 = P.double(), C.detach().double()
    assert abs(float((P64 * C64).sum()) - float(d)) <= d_tolerance(C, m, n), \
        (float(d), float((P64 * C64).sum()))


def plain_sequence_distance(m, n, C):
    """The O(mn) dynamic program of the sequence edit distance (float64, plain Python):
    ``C[i][j]`` replaces x_i by y_j, ``C[i][n]`` deletes x_i, ``C[m][j]`` inserts y_j."""
    D = [[0.0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        D[i][0] = D[i - 1][0] + C[i - 1][n]
    for j in range(1, n + 1):
        D[0][j] = D[0][j - 1] + C[m][j - 1]
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            D[i][j] = min(D[i - 1][j] + C[i - 1][n], D[i][j - 1] + C[m][j - 1],
                          D[i - 1][j - 1] + C[i - 1][j - 1])
    return D[m][n]


def exact_ties(C):
    """Whether every cost is a multiple of 1/2 of moderate size: ties are exact, so the
    oracles' absolute tie tolerance and the library's relative one agree."""
    C = C.detach().double()
    return bool((C * 2 == torch.round(C * 2)).all()) and float(C.abs().max()) <= 1e6


# ---------------------------------------------------------------------------- single pairs
@fuzz
@given(pair=pairs(), data=st.data())
def test_fuzz_single_pair_ops(pair, data):
    """edit_distance, coopt_matrix, pseudo_edit_distance, soft_edit_distance and the
    alignments' mappings on any cost tensor."""
    x, y = pair
    m, n = len(x), len(y)
    C, errors = data.draw(costs_for(m, n))
    record("single_pair_ops", x=x, y=y, C=C)
    ok, got = attempt(lambda: bedl_torch.coopt_matrix(x, y, C), label="coopt_matrix")
    if errors:
        assert not ok and isinstance(got, errors), (errors, got)
        ok_d, got_d = attempt(lambda: bedl_torch.edit_distance(x, y, C), label="edit_distance")
        assert not ok_d and isinstance(got_d, errors), (errors, got_d)
        return
    if not fits(C, m, n):
        assert not ok and isinstance(got, ValueError) and "too large" in str(got), got
        return
    assert ok, got
    d, P = got
    d = d.detach()
    check_coopt(C, m, n, d, P)
    # the distance alone, and its gradient, which is P
    leaf = C.detach().clone().requires_grad_(True)
    d2 = bedl_torch.edit_distance(x, y, leaf)
    assert abs(float(d2.detach()) - float(d)) <= d_tolerance(C, m, n)
    d2.backward()
    assert torch.allclose(leaf.grad.double(), P.double(), rtol=0,
                          atol=1e-12 if C.dtype == torch.float64 else 1e-6)
    # pseudo distance at its own reference costs: sum(P * C) = d
    pseudo = bedl_torch.pseudo_edit_distance(x, y, C, C.detach())
    assert abs(float(pseudo.detach()) - float(d)) <= d_tolerance(C, m, n)
    # the soft distance: a finite lower bound within T log(#mappings) <= T (m + n) log 2 of d
    # (or a ValueError where the costs are too large for T), its gradient an alignment
    T = data.draw(st.sampled_from([1e-300, 1e-8, 1e-3, 0.5, 1.0, 10.0, 1e6, 1e300]))
    soft_leaf = C.detach().clone().requires_grad_(True)
    ok, soft = attempt(lambda: bedl_torch.soft_edit_distance(x, y, soft_leaf, T), label="soft")
    if not ok:
        assert isinstance(soft, ValueError) and "too large" in str(soft), soft
    else:
        assert torch.isfinite(soft), "non-finite result"
        gap = float(d) - float(soft.detach())
        tol = soft_tolerance(C, m, n, T, float(soft.detach()))
        assert -tol <= gap <= T * (m + n) * math.log(2) + tol, (float(d), float(soft), T)
        soft.backward()
        check_alignment(soft_leaf.grad, m, n)
    # mappings: the documented optimal one and uniform samples are valid and co-optimal
    if m + n <= 40:
        mappings = [optimal_mapping(x, y, C)] + sample_mappings(x, y, C, 2,
                                                                torch.Generator().manual_seed(0))
        for mapping in mappings:
            assert sorted(i for i, _ in mapping if i is not None) == list(range(m)), mapping
            assert sorted(j for _, j in mapping if j is not None) == list(range(n)), mapping
            cost = float(mapping_cost(mapping, C.detach()))
            assert abs(cost - float(d)) <= d_tolerance(C, m, n), (cost, float(d))
    # the references: the plain DP (sequences), the forest recursion (tiny trees)
    C64 = C.detach().double()
    if not isinstance(x, Tree) and m * n <= 2500:
        want = plain_sequence_distance(m, n, C64.tolist())
        assert abs(float(d) - want) <= d_tolerance(C, m, n), (float(d), want)
        if C.dtype == torch.float64 and exact_ties(C) and m * n <= 400:
            _, P_ref, _ = sequence_reference(list(x), list(y), C64.numpy())
            assert np.allclose(P.detach().numpy(), P_ref, rtol=0, atol=1e-9)
    if isinstance(x, Tree) and m + n <= 9:
        want, P_ref, _ = forest_recursion(x, y, C64.numpy())
        assert abs(float(d) - want) <= d_tolerance(C, m, n), (float(d), want)
        if C.dtype == torch.float64 and exact_ties(C):
            assert np.allclose(P.detach().numpy(), P_ref, rtol=0, atol=1e-9)


@fuzz
@given(x=structures(8), y=st.one_of(structures(8), st.none(), st.integers(), st.builds(object),
                                    st.sets(st.integers(), max_size=2)),
       data=st.data())
def test_fuzz_single_pair_odd_structures(x, y, data):
    """Mixed trees and sequences and objects of other types are TypeErrors (valid pairs with
    too large costs ValueErrors)."""
    m = len(x)
    n = len(y) if isinstance(y, (Tree, str, list, tuple)) else 1
    C, _ = data.draw(costs_for(m, n, allow_bad=False))
    record("single_pair_odd_structures", x=x, y=y, C=C)
    valid = isinstance(y, (Tree, str, list, tuple)) and isinstance(x, Tree) == isinstance(y, Tree)
    for call in (lambda: bedl_torch.edit_distance(x, y, C),
                 lambda: bedl_torch.coopt_matrix(y, x, C.t()),
                 lambda: bedl_torch.edit_distance_batch([x], [y], [C])):
        ok, got = attempt(call)
        if not valid:
            assert not ok and isinstance(got, TypeError), got
        elif not fits(C, m, n):
            assert not ok and isinstance(got, ValueError) and "too large" in str(got), got
        else:
            assert ok, got


# ---------------------------------------------------------------------------- batches
@fuzz
@given(data=st.data(), count=st.integers(0, 4), trees_=st.booleans(),
       dtype=st.sampled_from([torch.float64, torch.float32]))
def test_fuzz_batches(data, count, trees_, dtype):
    """edit_distance_batch, coopt_matrix_batch and PairBatch agree with single pairs; padding
    beyond each pair's block is ignored."""
    draw_one = trees(12) if trees_ else sequences(12)
    xs = [data.draw(draw_one) for _ in range(count)]
    ys = [data.draw(draw_one) for _ in range(count)]
    Cs = []
    for x, y in zip(xs, ys):
        values = data.draw(cost_values((len(x) + 1, len(y) + 1), dtype, len(x) + len(y)))
        Cs.append(values.to(dtype))
    batch = PairBatch(xs, ys)
    B, rows, cols = batch.shape
    padded = data.draw(cost_values((B, rows, cols), dtype, rows + cols)).to(dtype)
    for k, C in enumerate(Cs):
        padded[k, :C.shape[0], :C.shape[1]] = C
    record("batches", xs=xs, ys=ys, padded=padded)
    too_large = [k for k, (x, y, C) in enumerate(zip(xs, ys, Cs)) if not fits(C, len(x), len(y))]
    if too_large:  # the first such pair is named, whatever the other pairs
        for call in (lambda: bedl_torch.coopt_matrix_batch(xs, ys, Cs),
                     lambda: bedl_torch.edit_distance_batch(xs, ys, padded),
                     lambda: batch.coopt(padded)):
            ok, got = attempt(call)
            assert not ok and f"pair {too_large[0]} are too large" in str(got), got
        return

    d_list, P_list = bedl_torch.coopt_matrix_batch(xs, ys, Cs)
    d_pad, P_pad = bedl_torch.coopt_matrix_batch(xs, ys, padded)
    assert torch.equal(bedl_torch.edit_distance_batch(xs, ys, Cs), d_list)
    assert torch.equal(bedl_torch.edit_distance_batch(xs, ys, padded), d_pad)
    assert d_list.shape == (count,) and P_pad.shape == padded.shape
    d_b, P_b = batch.coopt(padded)
    assert torch.equal(batch.distances(padded), d_pad) and torch.equal(d_b, d_pad)
    assert torch.equal(P_b, P_pad)
    pseudo = batch.distances(padded, mode="pseudo")
    pseudo_p = batch.pseudo_distances(padded, P_b)
    for k, (x, y, C) in enumerate(zip(xs, ys, Cs)):
        m, n = len(x), len(y)
        d, P = bedl_torch.coopt_matrix(x, y, C)
        check_coopt(C, m, n, d, P)
        assert torch.equal(d_list[k], d) and torch.equal(d_pad[k], d), (d_list[k], d_pad[k], d)
        assert torch.equal(P_list[k], P) and torch.equal(P_pad[k, :m + 1, :n + 1], P)
        assert (P_pad[k, m + 1:] == 0).all() and (P_pad[k, :, n + 1:] == 0).all()
        assert abs(float(pseudo[k]) - float(d)) <= d_tolerance(C, m, n)
        assert abs(float(pseudo_p[k]) - float(d)) <= d_tolerance(C, m, n)


@fuzz
@given(data=st.data(), count=st.integers(1, 3))
def test_fuzz_batches_bad_costs(data, count):
    """Per-pair lists with a bad entry, padded tensors of the wrong size: contract errors."""
    xs = [data.draw(sequences(6)) for _ in range(count)]
    ys = [data.draw(sequences(6)) for _ in range(count)]
    Cs, errors = [], []
    for x, y in zip(xs, ys):
        C, errors_of_C = data.draw(costs_for(len(x), len(y)))
        Cs.append(C)
        errors.append(errors_of_C)
    extra = data.draw(st.sampled_from(["none", "missing", "extra", "mixed_dtype", "padded"]))
    expected = ()
    if extra == "padded":
        rows = max(len(x) for x in xs) + 1 + data.draw(st.integers(-1, 1))
        cols = max(len(y) for y in ys) + 1 + data.draw(st.integers(-1, 1))
        Cs = torch.zeros(count + data.draw(st.integers(-1, 1)), max(rows, 0), max(cols, 0))
        if tuple(Cs.shape) != (count, rows, cols) or rows < max(len(x) for x in xs) + 1 \
                or cols < max(len(y) for y in ys) + 1:
            expected = (ValueError,)
    else:
        if extra == "mixed_dtype" and Cs[0].dtype in (torch.float32, torch.float64):
            Cs[0] = Cs[0].detach().to(
                torch.float32 if Cs[0].dtype == torch.float64 else torch.float64)
        for x, y, C, errors_of_C in zip(xs, ys, Cs, errors):
            if errors_of_C:
                expected += errors_of_C
            elif not torch.isfinite(C).all() or not fits(C, len(x), len(y)):
                expected += (ValueError,)  # (float64 costs beyond float32's range: inf)
        if len({C.dtype for C in Cs}) > 1:
            expected += (TypeError,)
        if extra == "missing":
            Cs = Cs[:-1]
            expected += (ValueError,)
        elif extra == "extra":
            Cs = Cs + [Cs[-1]]
            expected += (ValueError,)
    record("batches_bad_costs", xs=xs, ys=ys, Cs=Cs)
    for call in (lambda: bedl_torch.edit_distance_batch(xs, ys, Cs),
                 lambda: bedl_torch.coopt_matrix_batch(xs, ys, Cs)):
        ok, got = attempt(call)
        if expected:
            assert not ok and isinstance(got, expected), (expected, got)
        else:
            assert ok, got
            out = got if isinstance(got, torch.Tensor) else got[0]
            assert torch.isfinite(out).all(), "non-finite result"


# ---------------------------------------------------------------------------- cost modules
@st.composite
def cost_modules(draw, alphabet):
    """A cost module over ``alphabet`` (labels other than None), with odd parameters: zero,
    duplicate, tiny and huge vectors, negative matrices, float32 or float64."""
    U = len(alphabet)
    dtype = draw(st.sampled_from([torch.float64, torch.float32]))
    kind = draw(st.sampled_from(["euclidean", "unit", "cosine", "matrix", "euclidean_default"]))
    if kind == "unit":
        return bedl_torch.UnitCost(alphabet, dtype=dtype)
    if kind == "euclidean_default":
        return bedl_torch.EuclideanCost(alphabet, dtype=dtype)
    dim = draw(st.integers(1, 4))
    path = 2 * MODULE_OBJECT_NODES
    if kind == "euclidean":
        # a cost is at most twice a vector's norm, and the norm's squares must not overflow
        cap = cost_cap(dtype, path) / 2
        if not HUGE_COSTS:
            cap = min(cap, math.sqrt(float(torch.finfo(dtype).max)) / 4)
        emb = draw(cost_values((U, dim), dtype, path)).clamp(-cap, cap) / math.sqrt(dim)
        if U > 1 and draw(st.booleans()):
            emb[1] = emb[0]  # two symbols at one point: zero replacement cost
        return bedl_torch.EuclideanCost(alphabet, emb.to(dtype))
    if kind == "cosine":
        vectors = draw(cost_values((U, dim), dtype, 1)).to(dtype)
        words = [a for a in alphabet if a is not None]
        vectors = vectors[:len(words)]
        gap_cost = draw(st.sampled_from([0.25, 0.5, 0.0, 1.0]))
        unlabeled = draw(st.sampled_from(["gap", (0.5, 0.5), (0.0, 1.0)]))
        return bedl_torch.CosineCost(words, vectors, gap_cost=gap_cost, unlabeled=unlabeled)
    matrix = draw(cost_values((U + 1, U + 1), dtype, path))
    return MatrixCost(alphabet, matrix, dtype=dtype)


#: Most nodes of an object in the cost module tests (paths and stars of trees(8)).
MODULE_OBJECT_NODES = 40

alphabets = st.lists(st.one_of(st.sampled_from("abcd"), st.integers(0, 3), st.none()),
                     min_size=0, max_size=5, unique=True)


def breaks_overflow_rule(cost, path):
    """Whether a cost module's table over all its symbols (gap included) breaks the overflow
    rule for paths of ``path`` costs, or is not finite: the only reasons to reject it."""
    table = subtable_of(cost, torch.arange(len(cost.alphabet) + 1)).detach()
    big = table.double()
    if not torch.isfinite(big).all():
        return True
    return 2.0 * path * float(big.abs().max()) > float(torch.finfo(table.dtype).max)


@fuzz
@given(data=st.data(), alphabet=alphabets, trees_=st.booleans(),
       mode=st.sampled_from(["exact", "exact", "pseudo", "soft"]), same=st.booleans(),
       chunk=st.one_of(st.none(), st.integers(1, 5)), unknown=st.sampled_from(["error", "gap"]),
       with_reference=st.booleans())
def test_fuzz_pairwise_distances(data, alphabet, trees_, mode, same, chunk, unknown,
                                 with_reference):
    """pairwise_distances under every cost module agrees with edit_distance (soft mode:
    soft_edit_distance) on the module's costs; finite values, gradients and symmetry where
    declared."""
    cost = data.draw(cost_modules(alphabet))
    known = list(cost.alphabet)
    label = st.sampled_from(known + ["unknown-label"]) if known else st.just("unknown-label")
    draw_one = trees(8, label) if trees_ else sequences(8, label)
    X = data.draw(st.lists(draw_one, max_size=5))
    Y = None if same else data.draw(st.lists(draw_one, max_size=5))
    reference = data.draw(cost_modules(alphabet)) if with_reference and mode == "pseudo" else None
    # blocks of rows of at most this many pairs (limits.MATRIX_BLOCK_PAIRS; None: the default),
    # which exact mode takes without a gradient to record
    block_pairs = data.draw(st.sampled_from([None, None, 1, 3]))
    no_grad = block_pairs is not None and data.draw(st.booleans())
    record("pairwise_distances", X=X, Y=Y, cost=cost, mode=mode, reference=reference,
           chunk=chunk, unknown=unknown, block_pairs=block_pairs, no_grad=no_grad)
    used = {label for o in X + (Y or []) for label in (o.labels if isinstance(o, Tree) else o)}
    uses_unknown = any(label not in module.alphabet for label in used
                       for module in ([cost] if reference is None else [cost, reference]))

    temperature = data.draw(st.sampled_from([1e-3, 1.0, 100.0])) if mode == "soft" else None

    def call():
        saved = ops.limits.MATRIX_BLOCK_PAIRS
        if block_pairs is not None:
            ops.limits.MATRIX_BLOCK_PAIRS = block_pairs
        try:
            with torch.set_grad_enabled(not no_grad and torch.is_grad_enabled()):
                return bedl_torch.pairwise_distances(X, Y, cost, mode=mode, reference_cost=reference,
                                                     chunk_size=chunk, unknown=unknown,
                                                     temperature=temperature)
        finally:
            ops.limits.MATRIX_BLOCK_PAIRS = saved

    ok, D = attempt(call, label="pairwise_distances")
    if uses_unknown and unknown == "error":
        assert not ok and isinstance(D, ValueError) and "missing from" in str(D), D
        return
    Ys = X if Y is None else Y
    if not ok:  # overflowing costs: a ValueError (too large, or not finite once computed)
        assert isinstance(D, ValueError) and \
            any(what in str(D) for what in ("too large", "finite", "NaN or inf")), D
        if mode == "soft":  # (soft distances also bound the costs by the temperature)
            return
        longest = max(map(len, X), default=0) + max(map(len, Ys), default=0)
        assert any(breaks_overflow_rule(module, longest) for module in (cost, reference)
                   if module is not None), D
        return
    assert D.shape == (len(X), len(Ys))
    assert torch.isfinite(D).all(), "non-finite result"
    if Y is None and cost.symmetric:
        assert torch.equal(D, D.T)
    if mode in ("exact", "soft"):
        pair_costs = []  # each pair's costs through the module, differentiable
        for i, x in enumerate(X):
            for j, y in enumerate(Ys):
                pair_costs.append((x, y, PairBatch([x], [y]).costs(cost, unknown=unknown)[0]))
                C = pair_costs[-1][2].detach()
                want = bedl_torch.edit_distance(x, y, C) if mode == "exact" else \
                    bedl_torch.soft_edit_distance(x, y, C, temperature)
                got = float(D[i, j].detach())
                tol = d_tolerance(C, len(x), len(y)) if mode == "exact" else \
                    soft_tolerance(C, len(x), len(y), temperature, float(want))
                assert abs(got - float(want)) <= tol, (i, j, got, float(want))
        params = [p for p in cost.parameters() if p.requires_grad]
        if params and D.requires_grad:
            grads = torch.autograd.grad(D.sum(), params, allow_unused=True)
            for g in grads:
                assert g is None or torch.isfinite(g).all(), "non-finite gradient"
            if mode == "exact":
                # the reference: sum over pairs of <P, C>, P frozen, C through the module's
                # per-pair costs (another path than the kernels' symbol tables)
                total = 0.0
                for x, y, C in pair_costs:
                    P = bedl_torch.coopt_matrix(x, y, C.detach())[1]
                    total = total + (P.to(C.dtype) * C).sum()
                want = torch.autograd.grad(total, params, allow_unused=True) \
                    if torch.is_tensor(total) and total.requires_grad else [None] * len(params)
                rtol = 1e-7 if D.dtype == torch.float64 else 2e-3
                for p, g, w in zip(params, grads, want):
                    g = torch.zeros_like(p) if g is None else g
                    w = torch.zeros_like(p) if w is None else w
                    if not p.numel():
                        continue
                    scale = 1.0 + float(w.abs().max())
                    err = float((g - w).abs().max())
                    assert err <= rtol * scale * (1 + len(X) * len(Ys)), (err, g, w)


def reference_neighbours(D, k, same):
    """Each row's ``k`` smallest entries of the matrix ``D`` by (distance, index), the
    diagonal left out where ``same``."""
    D = D.clone()
    if same:
        D.fill_diagonal_(math.inf)
    order = torch.argsort(D, dim=1, stable=True)[:, :k]
    return D.gather(1, order), order


def reference_within(D, radius, same):
    """The entries of ``D`` at most ``radius``, row-major, the diagonal left out where ``same``."""
    mask = D <= radius
    if same:
        mask.fill_diagonal_(False)
    r, c = torch.nonzero(mask, as_tuple=True)
    return r, c, D[r, c]


@fuzz
@given(data=st.data(), alphabet=alphabets, trees_=st.booleans(), same=st.booleans(),
       unknown=st.sampled_from(["error", "gap"]),
       bounds=st.lists(st.sampled_from(["label", "traversal", "upper"]), unique=True),
       block_size=st.one_of(st.none(), st.integers(1, 4)),
       api=st.sampled_from(["function", "index", "distributed"]),
       symmetric=st.sampled_from([None, None, False, True]),
       subset_min=st.sampled_from([64, 1]), count_form=st.sampled_from(["chosen", "never", "always"]))
def test_fuzz_search(data, alphabet, trees_, same, unknown, bounds, block_size, api, symmetric, subset_min,
                     count_form):
    """kneighbors and radius_neighbors (the functions, NeighborIndex, and the distributed
    functions in one process) give the matrix's answer under every cost module, any subset of
    the bounds and any block size, half the matrix mirrored or not (``symmetric``), ties by
    index included: the same indices and the same distance bits; stats that add up; k out of
    range and NaN radii a ValueError. ``subset_min=1``: calls on few objects get tables of
    those objects at any table size (``search.problem.SUBSET_MIN_OBJECTS``). ``count_form``: the
    label bound's intersections from label counts where they would be chosen, never, or always
    (``search.label_bound._COUNT_FORM_RATIO`` and ``_COUNT_FORM_SPARSE_ROWS``)."""
    rules = ("_COUNT_FORM_RATIO", "_COUNT_FORM_SPARSE_ROWS")
    forced = {"chosen": {rule: getattr(search_label_bound, rule) for rule in rules},
              "never": dict.fromkeys(rules, 0), "always": dict.fromkeys(rules, math.inf)}[count_form]
    with mock.patch.object(search_problem, "SUBSET_MIN_OBJECTS", subset_min), \
            mock.patch.multiple(search_label_bound, **forced):
        _search_example(data, alphabet, trees_, same, unknown, bounds, block_size, api, symmetric)


def _search_example(data, alphabet, trees_, same, unknown, bounds, block_size, api, symmetric):
    cost = data.draw(cost_modules(alphabet))
    known = list(cost.alphabet)
    # (a label missing from the alphabet in about one node of twenty)
    label = rarely(20).flatmap(lambda odd: st.just("unknown-label") if odd or not known else st.sampled_from(known))
    draw_one = trees(6, label) if trees_ else sequences(6, label)
    X = data.draw(st.lists(draw_one, min_size=1, max_size=9))
    Y = None if same else data.draw(st.lists(draw_one, min_size=1, max_size=7))
    Ys = X if same else Y
    candidates = len(Ys) - 1 if same else len(Ys)
    k = data.draw(mostly(None, [0, candidates + 1]))
    k = data.draw(st.integers(1, candidates)) if k is None and candidates >= 1 else (k or 0)
    if api == "index":
        symmetric = None  # (the index's own rule: X=None and cost.symmetric)
    record("search", X=X, Y=Y, cost=cost, unknown=unknown, bounds=bounds, block_size=block_size,
           api=api, k=k, symmetric=symmetric)
    ok, D = attempt(lambda: bedl_torch.pairwise_distances(X, Y, cost, unknown=unknown, symmetric=symmetric),
                    label="matrix")
    opts = dict(unknown=unknown, bounds=bounds)
    if symmetric is not None:
        opts["symmetric"] = symmetric
    if api == "index":
        index_ok, index = attempt(lambda: bedl_torch.NeighborIndex(Ys, cost, unknown=unknown, bounds=bounds),
                                  label="index")
        if not index_ok:  # (Y's labels or costs: the matrix fails too, or only X's objects do)
            assert not ok or not same, index
            return

    def search(what, **kw):
        if api == "index":
            return getattr(index, what)(None if same else X, block_size=block_size, return_stats=True, **kw)
        module = bedl_torch.distributed if api == "distributed" else bedl_torch
        return getattr(module, what)(X, Y, cost=cost, block_size=block_size, return_stats=True,
                                     **opts, **kw)

    matrix_error = None if ok else D
    D = D.detach().to(torch.float64) if ok else None
    values = (sorted(set(D[torch.isfinite(D)].tolist())) if ok else []) or [0.0]
    radius = data.draw(st.one_of(st.sampled_from(values),  # ties at the radius
                                 st.sampled_from([-math.inf, math.inf, math.nan, -1.0, 0.5])))
    for what, arg in (("kneighbors", dict(k=k)), ("radius_neighbors", dict(radius=radius))):
        found, got = attempt(lambda: search(what, **arg), label=what)
        if what == "radius_neighbors" and math.isnan(radius):
            assert not found and isinstance(got, ValueError) and "NaN" in str(got), got
            continue
        if symmetric and not same:  # (a search's symmetric=True means X against itself)
            assert not found and isinstance(got, ValueError) and "needs Y=None" in str(got), got
            continue
        if not ok:  # the matrix's error (labels, costs not finite or too large) is the search's,
            # even where its bounds decide every pair or it has none (one object)
            assert not found and isinstance(got, ValueError), (matrix_error, got)
            continue
        if what == "kneighbors" and not 1 <= k <= candidates:
            assert not found and isinstance(got, ValueError) and "k" in str(got), got
            continue
        assert found, got
        *answer, stats = got
        want = reference_neighbours(D, k, same) if what == "kneighbors" else reference_within(D, radius, same)
        assert all(torch.equal(a, b) for a, b in zip(answer, want)), (what, answer, want)
        assert stats["pairs"] == stats["decided_by_label"] + stats["decided_by_traversal"] + stats["exact"]
        assert stats["pairs"] == len(X) * candidates


@fuzz
@given(data=st.data(), alphabet=alphabets)
def test_fuzz_cost_module_constructors(data, alphabet):
    """The cost modules' constructors on odd arguments: contract errors or a working module."""
    U = len(alphabet)
    words = [a for a in alphabet if a is not None]
    kind = data.draw(st.sampled_from(["euclidean", "unit", "cosine", "matrix"]))
    right = {"euclidean": (U, 2), "unit": (U, 2), "cosine": (len(words), 3),
             "matrix": (U + 1, U + 1)}[kind]
    shape = data.draw(mostly(right, [(U, 0), (U + 1, 2), (U,), (U + 1, U + 1), (U, U + 1),
                                     (0, 0)]))
    dtype = data.draw(mostly(torch.float64, [torch.float32, torch.float16, torch.int64,
                                             torch.complex64, None]))
    tensor = data.draw(cost_values(shape, torch.float64, 1))
    if data.draw(rarely(8)) and tensor.numel():
        tensor.view(-1)[0] = data.draw(st.sampled_from([math.nan, math.inf]))
    if dtype is not None:
        tensor = tensor.to(dtype)
    as_list = data.draw(st.booleans())
    arg = tensor.tolist() if as_list else tensor
    device = data.draw(mostly(None, ["cpu", "meta", "nonsense", 3]))
    record("cost_module_constructors", kind=kind, alphabet=alphabet, arg=arg, device=device)

    def make():
        if kind == "euclidean":
            return bedl_torch.EuclideanCost(alphabet, arg, device=device)
        if kind == "unit":
            return bedl_torch.UnitCost(alphabet, dtype=dtype or torch.float64, device=device)
        if kind == "cosine":
            return bedl_torch.CosineCost(words, arg)
        return MatrixCost(alphabet, arg, dtype=dtype)

    ok, cost = attempt(make, label=kind)
    if not ok:
        return
    # a constructed module works: distances between two sequences over its alphabet, unless
    # its vectors are so large that the squares in their norms overflow (a ValueError)
    seqs = [list(cost.alphabet[:2]), list(cost.alphabet[1:3])]
    ok, D = attempt(lambda: bedl_torch.pairwise_distances(seqs, None, cost),
                    label="pairwise_distances")
    if ok:
        assert torch.isfinite(D).all(), "non-finite result"
    else:
        tensors = list(cost.parameters()) + list(cost.buffers())
        largest = max((float(t.detach().abs().max()) for t in tensors if t.numel()), default=0.0)
        assert isinstance(D, ValueError) and ("finite" in str(D) or "too large" in str(D)) and \
            largest > math.sqrt(float(torch.finfo(cost.dtype).max)) / 4, (largest, D)


# ---------------------------------------------------------------------------- tree readers
bracket_text = st.text(alphabet="{}ab \\\t", max_size=40)
ptb_text = st.text(alphabet="() ab12-LRB\n", max_size=40)
python_samples = [
    "x = 1", "def f(a, b=2):\n    return a + b\n", "class A:\n    pass\n",
    "for i in range(3):\n    print(i)\n", "lambda: (yield)", "import os, sys as s\n",
    "x = [i * j for i in a if i for j in b]", "async def g():\n    await h()\n",
    "global q", "try:\n    pass\nexcept E as e:\n    raise\nfinally:\n    del x\n",
]


@st.composite
def mutated(draw, texts):
    """A text from ``texts`` with random characters deleted, repeated or inserted."""
    text = draw(st.sampled_from(texts)) if isinstance(texts, list) else draw(texts)
    for _ in range(draw(st.integers(0, 4))):
        if not text:
            break
        pos = draw(st.integers(0, len(text) - 1))
        op = draw(st.sampled_from(["delete", "repeat", "insert"]))
        if op == "delete":
            text = text[:pos] + text[pos + 1:]
        elif op == "repeat":
            text = text[:pos] + text[pos] * draw(st.integers(2, 2000)) + text[pos:]
        else:
            text = text[:pos] + draw(st.characters()) + text[pos:]
    return text


@st.composite
def nested_text(draw):
    """Deeply nested text for every reader: brackets, PTB, JSON, Python."""
    k = draw(st.integers(1, 30000))
    return draw(st.sampled_from([
        "{a" * k + "}" * k, "(a " * k + "b" + ")" * k, "[" * k + "]" * k,
        '{"nodes": ["a"], "adj": [' + "[" * k + "]" * k + "]}",
        "x = " + "-" * k + "1", "x = " + "+".join(["a"] * k), "x = " + "(" * k + ")" * k,
    ]))


def ptb_of(tree):
    """A Penn-treebank s-expression of ``tree``: ``(label child ...)``, a leaf ``(label label)``."""
    def node(i):
        label = str(tree.labels[i]).replace(" ", "_") or "x"
        inner = " ".join(node(c) for c in tree.children[i]) or label
        return f"({label} {inner})"

    return node(0) if tree.depth() < 200 else "(a b)"


word_trees = trees(12, st.sampled_from(["a", "b", "-LRB-", "It", "7"]))

tree_texts = st.one_of(
    bracket_text, ptb_text, st.text(max_size=30), nested_text(),
    trees(12).map(Tree.to_bracket).flatmap(lambda s: mutated(st.just(s))),
    word_trees.map(ptb_of).flatmap(lambda s: mutated(st.just(s))),
    trees(12).map(lambda t: json.dumps(t.to_json(), default=str)).flatmap(
        lambda s: mutated(st.just(s))),
    mutated(python_samples),
)


@fuzz
@given(text=tree_texts, inner_labels=st.booleans(), lowercase=st.booleans(),
       identifiers=st.booleans())
def test_fuzz_tree_readers_text(text, inner_labels, lowercase, identifiers):
    """from_bracket, from_ptb, from_json, load_json and from_python on random text."""
    record("tree_readers_text", text=text)
    ok, t = attempt(lambda: Tree.from_bracket(text), label="from_bracket")
    if ok:
        assert Tree.from_bracket(t.to_bracket()) == t
    ok, t = attempt(lambda: Tree.from_ptb(text, inner_labels=inner_labels, lowercase=lowercase),
                    label="from_ptb")
    if ok:
        assert all(label is None or isinstance(label, str) for label in t.labels)
    ok, t = attempt(lambda: Tree.from_json(text), label="from_json")
    if ok:
        assert Tree.from_json(t.to_json()) == t
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tree.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        attempt(lambda: Tree.load_json(path), label="load_json")
    ok, t = attempt(lambda: Tree.from_python(text, include_identifiers=identifiers),
                    CONTRACT + (SyntaxError,), label="from_python")
    if ok:
        assert t.labels[0] == "Module" and len(t) == sum(1 for _ in ast.walk(ast.parse(text)))


json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 8), st.floats(), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=20)


@st.composite
def nodes_and_adj(draw):
    """``(labels, children)`` of a random tree, often with a child index, a label or a row
    changed, dropped or duplicated."""
    tree = draw(trees(10))
    nodes, adj = list(tree.labels), [list(c) for c in tree.children]
    for _ in range(draw(st.integers(0, 2))):
        if not adj:
            break
        row = draw(st.integers(0, len(adj) - 1))
        change = draw(st.sampled_from(["child", "label", "drop_row", "repeat_child", "json"]))
        kids = adj[row] if isinstance(adj[row], list) else []  # (an earlier change)
        if change == "child":
            adj[row] = kids + [draw(st.one_of(st.integers(-1, len(adj) + 1), st.just(1.0),
                                              st.just(True), st.text(max_size=1)))]
        elif change == "label":
            nodes[row] = draw(json_like)
        elif change == "drop_row":
            del adj[row]
        elif change == "repeat_child" and kids:
            adj[row] = kids + kids[:1]
        else:
            adj[row] = draw(json_like)
    return nodes, adj


@fuzz
@given(obj=json_like, tree_data=st.one_of(
           nodes_and_adj(), st.tuples(st.one_of(json_like, st.lists(labels, max_size=6)),
                                      st.one_of(json_like, st.lists(st.lists(
                                          st.integers(-1, 7), max_size=3), max_size=7)))),
       tuple_tree=st.one_of(json_like, trees(10).map(Tree.to_tuple)))
def test_fuzz_tree_readers_objects(obj, tree_data, tuple_tree):
    """The Tree constructor, from_json on dicts and from_tuple on random nested objects."""
    nodes, adj = tree_data
    record("tree_readers_objects", obj=obj, nodes=nodes, adj=adj, tuple_tree=tuple_tree)
    ok, t = attempt(lambda: Tree(nodes, adj), label="Tree")
    if ok:
        assert len(t) == len(nodes) and sum(t.subtree_sizes()[c] for c in t.children[0]) + 1 == len(t)
    for data in (obj, {"nodes": nodes, "adj": adj}, {"nodes": nodes}):
        attempt(lambda: Tree.from_json(data), label="from_json")
    for source in (obj, tuple_tree):
        ok, t = attempt(lambda: Tree.from_tuple(source), label="from_tuple")
        if ok:
            assert Tree.from_tuple(t.to_tuple()) == t
    attempt(lambda: Tree.from_python(obj), CONTRACT + (SyntaxError,), label="from_python")


# ---------------------------------------------------------------------------- learning
def same_label(a, b):
    """Equal class labels, NaN equal to NaN (numpy's unique merges NaN labels into one class)."""
    return a == b or (a != a and b != b)


class_labels = st.one_of(st.integers(0, 2), st.sampled_from(["u", "v"]),
                         st.sampled_from([math.nan, 0.5, 1.5]), st.none())


@fuzz
@given(data=st.data(), trees_=mostly(True, [False, None]),
       n_prototypes=mostly(1, [0, 2, 3]), mode=mostly("pseudo", ["exact", "bogus"]),
       regularizer=st.sampled_from(["both", "logdet", "frobenius", None]),
       dim=mostly(None, [1, 2, 0]), dtype=mostly(torch.float64, [torch.float32, torch.float16]),
       alignments=st.sampled_from(["step", "initial"]), unknown=st.sampled_from(["error", "origin"]),
       max_rounds=st.integers(0, 2), max_eval=st.integers(1, 4),
       phi=st.sampled_from(["log4", "identity", "sigmoid"]))
def test_fuzz_bedl(data, trees_, n_prototypes, mode, regularizer, dim, dtype, alignments, unknown,
                   max_rounds, max_eval, phi):
    """BEDL.fit, predict and decision_distances on odd data: empty, one class, duplicates,
    NaN labels, mixed trees and sequences, unseen labels at prediction."""
    label = st.sampled_from("abc")
    label_kind = data.draw(mostly(st.integers(0, 2), [class_labels]))
    if trees_ is None:  # mixed
        draw_one = st.one_of(trees(5, label), sequences(5, label))
    else:
        draw_one = trees(5, label) if trees_ else sequences(5, label)
    X = data.draw(st.lists(draw_one, min_size=data.draw(mostly(2, [0])), max_size=7))
    if X and data.draw(st.booleans()):
        X = X + X[:data.draw(st.integers(1, len(X)))]  # duplicated objects
    y = data.draw(st.lists(label_kind, min_size=len(X), max_size=len(X)))
    if data.draw(rarely(10)):
        y = y[:-1]
    test_X = data.draw(st.lists(st.one_of(draw_one, trees(3, st.just("zzz"))), max_size=3))
    model = BEDL(n_prototypes=n_prototypes, mode=mode, regularizer=regularizer, dim=dim,
                 dtype=dtype, alignments=alignments, unknown=unknown, max_rounds=max_rounds,
                 max_eval=max_eval, phi=phi)
    record("bedl", X=X, y=y, test_X=test_X, model=repr(model))
    ok, _ = attempt(lambda: model.fit(X, y), label="fit")
    if not ok:
        return
    assert all(math.isfinite(v) for v in model.loss_history_ + model.actual_loss_history_), \
        "non-finite result"
    assert [X[i] for i in model.prototype_indices_] == list(model.prototypes_)
    D = model.decision_distances(X)
    assert np.isfinite(D).all(), "non-finite result"
    with torch.no_grad():  # each entry against the exact distance under the learned module's costs
        for i, x in enumerate(X):
            for j, p in enumerate(model.prototypes_):
                C = PairBatch([x], [p]).costs(model.cost_, unknown="error")[0]
                want = float(bedl_torch.edit_distance(x, p, C))
                assert abs(float(D[i, j]) - want) <= d_tolerance(C, len(x), len(p)), (i, j, D[i, j], want)
    predicted = model.predict(X)
    assert len(predicted) == len(X)
    assert all(any(same_label(p, c) for c in model.classes_) for p in predicted)
    ok, D = attempt(lambda: model.decision_distances(test_X), label="decision_distances")
    if ok:
        assert D.shape == (len(test_X), len(model.prototypes_)) and np.isfinite(D).all()


@fuzz
@given(data=st.data(), m=st.integers(0, 8), n_prototypes=mostly(1, [-1, 0, 2, 3]),
       max_iter=st.integers(0, 5),
       kind=st.sampled_from(["uniform", "symmetric", "zeros", "integers", "negative", "nan",
                             "inf", "huge", "wrong_shape"]))
def test_fuzz_median_glvq(data, m, n_prototypes, max_iter, kind):
    """MedianGLVQ.fit and predict on odd distance matrices, labels and initial prototypes."""
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**32 - 1)))
    D = torch.rand(m, m, generator=gen, dtype=torch.float64)
    if kind == "symmetric":
        D = (D + D.T) / 2
        D.fill_diagonal_(0)
    elif kind == "zeros":
        D.zero_()
    elif kind == "integers":
        D = torch.floor(3 * D)
    elif kind == "negative":
        D = D - 0.5
    elif kind in ("nan", "inf") and m:
        D[data.draw(st.integers(0, m - 1)), data.draw(st.integers(0, m - 1))] = \
            math.nan if kind == "nan" else math.inf
    elif kind == "huge":  # class sums and d+ + d- overflow; a power of two changes no decision
        D = torch.ldexp(D, torch.tensor(1024))
    elif kind == "wrong_shape":
        D = D[:, :max(m - 1, 0)]
    y = data.draw(st.lists(data.draw(mostly(st.integers(0, 2), [class_labels])), min_size=m,
                           max_size=m))
    init = data.draw(mostly(None, [st.lists(st.integers(-1, m + 1), max_size=4)]))
    if init is not None:
        init = data.draw(init)
    as_numpy = data.draw(st.booleans())
    D_in = D.numpy() if as_numpy else D
    model = MedianGLVQ(n_prototypes=n_prototypes, max_iter=max_iter)
    record("median_glvq", D=D_in, y=y, init=init, model=repr(model))
    ok, _ = attempt(lambda: model.fit(D_in, y, init_prototypes=init), label="fit")
    if not ok:
        return
    protos = model.prototypes_
    assert len(set(protos.tolist())) == len(protos) and all(0 <= p < m for p in protos)
    assert math.isfinite(model.likelihood_) and math.isfinite(model.loss_), "non-finite result"
    if kind == "huge":
        small = MedianGLVQ(n_prototypes=n_prototypes, max_iter=max_iter).fit(
            torch.ldexp(D, torch.tensor(-1024)), y, init_prototypes=init)
        assert small.prototypes_.tolist() == protos.tolist()
        assert (small.likelihood_, small.loss_) == (model.likelihood_, model.loss_)
    predicted = model.predict(D_in)
    assert len(predicted) == m

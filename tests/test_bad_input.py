"""Malformed trees, sequences and cost tensors give ValueError/TypeError with a helpful message,
never another exception or a crash."""
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bedl_torch
from bedl_torch.tree import Tree
from oracles import random_tree

X = Tree(["a", "b", "c"], [[1, 2], [], []])  # a(b, c): m = 3
Y = Tree(["a", "c"], [[1], []])  # a(c): n = 2


def good():
    return torch.rand(4, 3, dtype=torch.float64)


def _all_single_ops(x, y, C):
    yield lambda: bedl_torch.edit_distance(x, y, C)
    yield lambda: bedl_torch.coopt_matrix(x, y, C)
    yield lambda: bedl_torch.pseudo_edit_distance(x, y, C, C)
    yield lambda: bedl_torch.edit_distance_batch([x], [y], [C])
    yield lambda: bedl_torch.coopt_matrix_batch([x], [y], [C])


# ------------------------------------------------------------------------------ cost tensors
@pytest.mark.parametrize("shape", [(3, 2), (4, 2), (3, 3), (5, 3), (4, 4), (4,), (12,), (1, 4, 3),
                                   ()])
def test_wrong_cost_shape(shape):
    C = torch.rand(shape, dtype=torch.float64)
    for op in _all_single_ops(X, Y, C):
        with pytest.raises(ValueError, match=r"(?i)shape"):
            op()


def test_wrong_cost_shape_sequences():
    for C in (torch.rand(3, 3, dtype=torch.float64), torch.rand(2, 4, dtype=torch.float64)):
        for op in _all_single_ops("ab", "abc", C):
            with pytest.raises(ValueError, match=r"(?i)shape"):
                op()
    # an empty pair needs a (1, 1) matrix
    with pytest.raises(ValueError, match=r"(?i)shape"):
        bedl_torch.edit_distance("", "", torch.zeros(0, 0, dtype=torch.float64))


def test_message_mentions_expected_shape():
    with pytest.raises(ValueError) as info:
        bedl_torch.edit_distance(X, Y, torch.rand(3, 2, dtype=torch.float64))
    msg = str(info.value)
    assert "4" in msg and "3" in msg, msg


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", [(0, 0), (1, 2), (3, 0), (2, 1)])
def test_non_finite_costs(bad, where):
    C = good()
    C[where] = bad
    for op in _all_single_ops(X, Y, C):
        with pytest.raises(ValueError, match=r"(?i)nan|inf|finite"):
            op()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_costs_of_long_sequences(dtype, bad):
    """Long enough for the vectorized paths (the kernels' finiteness pass on the bits, the
    AVX2 distance strips); the unused corner [m, n] is checked too. The largest finite
    costs break the overflow rule (tests/test_overflow.py): a ValueError too, never a NaN."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, (40,), generator=gen).tolist()
    y = torch.randint(0, 3, (50,), generator=gen).tolist()
    C = torch.rand(41, 51, generator=gen, dtype=dtype)
    for where in [(0, 0), (17, 33), (40, 0), (0, 50), (39, 50), (40, 50)]:
        bad_C = C.clone()
        bad_C[where] = bad
        with pytest.raises(ValueError, match=r"(?i)nan|inf|finite"):
            bedl_torch.edit_distance(x, y, bad_C)
        with pytest.raises(ValueError, match=r"(?i)nan|inf|finite"):
            bedl_torch.coopt_matrix(x, y, bad_C)
    big = C.clone()
    big[5, 5] = torch.finfo(dtype).max
    big[6, 7] = -torch.finfo(dtype).max
    with pytest.raises(ValueError, match="too large"):
        bedl_torch.edit_distance(x, y, big)


def test_non_finite_padded_costs_in_pairbatch():
    batch = bedl_torch.PairBatch([X, X], [Y, Y])
    padded = torch.rand(2, 4, 3, dtype=torch.float64)
    padded[1, 0, 0] = math.nan
    with pytest.raises(ValueError, match=r"(?i)nan|inf|finite"):
        batch.distances(padded)
    with pytest.raises(ValueError, match=r"(?i)nan|inf|finite"):
        batch.coopt(padded)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool])
def test_integer_costs_are_type_errors(dtype):
    C = torch.ones(4, 3, dtype=dtype)
    for op in _all_single_ops(X, Y, C):
        with pytest.raises(TypeError, match=r"(?i)float|dtype|floating"):
            op()


def test_complex_costs_are_type_errors():
    C = torch.ones(4, 3, dtype=torch.complex128)
    with pytest.raises(TypeError):
        bedl_torch.edit_distance(X, Y, C)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA for a second device")
def test_mismatched_devices():
    Cc = good().cuda()
    with pytest.raises(ValueError, match=r"(?i)device"):
        bedl_torch.edit_distance_batch([X, X], [Y, Y], [good(), Cc])
    with pytest.raises(ValueError, match=r"(?i)device"):
        bedl_torch.pseudo_edit_distance(X, Y, good(), Cc)


def test_batch_length_mismatch():
    with pytest.raises(ValueError, match=r"(?i)length|len|number|same|pairs"):
        bedl_torch.edit_distance_batch([X, X], [Y], [good(), good()])
    with pytest.raises(ValueError, match=r"(?i)length|len|number|same|pairs"):
        bedl_torch.edit_distance_batch([X, X], [Y, Y], [good()])
    with pytest.raises(ValueError, match=r"(?i)length|len|number|same|pairs"):
        bedl_torch.PairBatch([X, X], [Y])


# ------------------------------------------------------------------------------ labels, structure
def test_label_missing_from_alphabet_is_named():
    from bedl_torch.costs import EuclideanCost, UnitCost

    for cost in (EuclideanCost(list("abc")), UnitCost(list("abc"))):
        with pytest.raises(ValueError, match="zebra"):
            cost.encode(["a", "zebra", "b"])
        with pytest.raises(ValueError, match="zebra"):
            bedl_torch.pairwise_distances([Tree(["a", "zebra"], [[1], []])], None, cost)
        with pytest.raises(ValueError, match="zebra"):
            bedl_torch.pairwise_distances([["a", "b"]], [["zebra"]], cost)
        with pytest.raises(ValueError, match="zebra"):
            bedl_torch.PairBatch([Tree(["a", "zebra"], [[1], []])], [Y]).costs(cost)


def test_encode_unknown_gap_option():
    from bedl_torch.costs import UnitCost

    cost = UnitCost(list("ab"))
    idx = cost.encode(["a", "q", "b"], unknown="gap")
    assert idx.tolist() == [0, cost.gap_index, 1]


def test_mixing_tree_and_sequence():
    C = torch.rand(4, 3, dtype=torch.float64)
    for op in _all_single_ops(X, ["a", "c"], C):
        with pytest.raises((TypeError, ValueError), match=r"(?i)tree|sequence"):
            op()
    for op in _all_single_ops("abc", Y, C):
        with pytest.raises((TypeError, ValueError), match=r"(?i)tree|sequence"):
            op()
    with pytest.raises((TypeError, ValueError), match=r"(?i)tree|sequence"):
        bedl_torch.pairwise_distances([X], ["ac"])
    with pytest.raises((TypeError, ValueError), match=r"(?i)tree|sequence"):
        bedl_torch.pairwise_distances([X, "ac"])


@pytest.mark.parametrize("bad", [None, 5, 3.5, {"a": 1}, object(), b"ab"[0], {"a", "b"}])
def test_non_tree_non_sequence_inputs(bad):
    C = torch.rand(3, 3, dtype=torch.float64)
    with pytest.raises((TypeError, ValueError)):
        bedl_torch.edit_distance(bad, "ab", C)
    with pytest.raises((TypeError, ValueError)):
        bedl_torch.coopt_matrix("ab", bad, C)


def test_cost_not_a_tensor_or_module():
    with pytest.raises(TypeError):
        bedl_torch.edit_distance(X, Y, "costs")
    with pytest.raises(TypeError):
        bedl_torch.pairwise_distances([X], [Y], cost="unit-please")


def test_pairwise_bad_mode_and_chunks():
    from bedl_torch.costs import UnitCost

    with pytest.raises(ValueError, match=r"(?i)mode"):
        bedl_torch.pairwise_distances([X], [Y], mode="approximate")
    with pytest.raises(TypeError, match=r"(?i)reference"):
        bedl_torch.pairwise_distances([X], [Y], UnitCost(list("abc")), mode="pseudo",
                                      reference_cost="unit")
    with pytest.raises(ValueError, match=r"(?i)chunk"):
        bedl_torch.pairwise_distances([X], [Y], chunk_size=0)


# ------------------------------------------------------------------------------ hypothesis fuzzing
labels = st.one_of(st.sampled_from(list("abc")), st.integers(-3, 3), st.none(),
                   st.floats(allow_nan=True), st.lists(st.integers(), max_size=2),
                   st.text(max_size=2))


@st.composite
def raw_tree_like(draw):
    """(labels, children) with arbitrary, usually invalid, indices."""
    n = draw(st.integers(0, 5))
    labs = draw(st.lists(labels, min_size=n, max_size=n))
    ch = draw(st.lists(st.lists(st.one_of(st.integers(-2, 7), st.just(1.5), st.text(max_size=1)),
                                max_size=3), min_size=0, max_size=n + 1))
    return labs, ch


@st.composite
def valid_tree(draw):
    n = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31))
    return Tree(*random_tree(n, "abc", seed))


structures = st.one_of(
    valid_tree(),
    st.text(alphabet="abc", max_size=5),
    st.lists(st.sampled_from(list("abc")), max_size=5),
    st.lists(labels, max_size=4),
    raw_tree_like(),
    st.none(),
    st.integers(),
    st.builds(object),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)

dtypes = st.sampled_from([torch.float64, torch.float32, torch.float16, torch.bfloat16,
                          torch.int64, torch.int32, torch.bool, torch.complex64])
special = st.sampled_from([0.0, 1.0, -1.0, math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324])


@st.composite
def cost_like(draw):
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.one_of(st.none(), st.integers(), st.text(max_size=3),
                              st.lists(st.floats(), max_size=3)))
    shape = tuple(draw(st.lists(st.integers(0, 7), min_size=0, max_size=3)))
    dtype = draw(dtypes)
    numel = int(np.prod(shape)) if shape else 1
    values = draw(st.lists(st.one_of(special, st.floats(-10, 10)), min_size=numel,
                           max_size=numel))
    t = torch.tensor(values, dtype=torch.float64).reshape(shape)
    try:
        t = t.to(dtype)
    except (RuntimeError, TypeError):  # e.g. nan -> int is undefined but allowed
        pass
    if kind == 1:
        return t.numpy() if t.dtype not in (torch.bfloat16,) else t
    if kind == 2 and t.dim() >= 2:
        return t.transpose(0, -1)  # non-contiguous
    if kind == 3 and t.is_floating_point():
        return t.requires_grad_(True)
    return t


@st.composite
def matching_costs(draw, x, y):
    """Correctly shaped float costs with a sprinkle of bad values (for valid structures)."""
    m = len(x) if isinstance(x, (Tree, str, list)) else 0
    n = len(y) if isinstance(y, (Tree, str, list)) else 0
    values = draw(st.lists(st.one_of(special, st.floats(-5, 5)), min_size=(m + 1) * (n + 1),
                           max_size=(m + 1) * (n + 1)))
    dtype = draw(st.sampled_from([torch.float64, torch.float32]))
    return torch.tensor(values, dtype=torch.float64).reshape(m + 1, n + 1).to(dtype)


def _only_value_or_type_errors(fn):
    try:
        out = fn()
    except (ValueError, TypeError):
        return None
    return out


FUZZ = settings(max_examples=250, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.filter_too_much])


@FUZZ
@given(x=structures, y=structures, C=cost_like())
def test_fuzz_single_ops(x, y, C):
    out = _only_value_or_type_errors(lambda: bedl_torch.edit_distance(x, y, C))
    if out is not None:
        assert isinstance(out, torch.Tensor) and out.dim() == 0
    _only_value_or_type_errors(lambda: bedl_torch.coopt_matrix(x, y, C))


@FUZZ
@given(data=st.data(), x=structures, y=structures)
def test_fuzz_shaped_costs(data, x, y):
    C = data.draw(matching_costs(x, y))
    out = _only_value_or_type_errors(lambda: bedl_torch.coopt_matrix(x, y, C))
    if out is not None:
        d, P = out
        # only finite inputs may succeed, and then (barring overflow of sums) results are finite
        assert torch.isfinite(C).all()
        if C.abs().max() < 1e30:
            assert torch.isfinite(d) and torch.isfinite(P).all()
    _only_value_or_type_errors(lambda: bedl_torch.edit_distance_batch([x, x], [y, y], [C, C]))


@FUZZ
@given(X=st.lists(structures, max_size=3), Y=st.one_of(st.none(), st.lists(structures, max_size=3)),
       cost=st.sampled_from(["none", "unit", "euclid", "str", "int"]),
       mode=st.sampled_from(["exact", "pseudo", "bogus", None]),
       ref=st.sampled_from(["none", "unit", "euclid"]),
       chunk=st.one_of(st.none(), st.integers(-2, 4)))
def test_fuzz_pairwise(X, Y, cost, mode, ref, chunk):
    from bedl_torch.costs import EuclideanCost, UnitCost

    mods = {"none": None, "unit": UnitCost(list("abc")), "euclid": EuclideanCost(list("abc")),
            "str": "unit", "int": 3}
    kw = {"chunk_size": chunk}
    if mode is not None:
        kw["mode"] = mode
    if ref != "none":
        kw["reference_cost"] = mods[ref]
    out = _only_value_or_type_errors(
        lambda: bedl_torch.pairwise_distances(X, Y, mods[cost], **kw))
    if out is not None:
        assert out.shape == (len(X), len(X) if Y is None else len(Y))
        assert torch.isfinite(out).all()

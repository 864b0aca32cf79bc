"""Malformed trees, sequences and cost tensors give ValueError/TypeError with a helpful message,
never another exception or a crash."""
import math
import re
import sys

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


# ------------------------------------------------------------------------------ unsupported tensors
# Every unsupported kind of tensor, with the error it must raise and a word of its message.
def _unsupported(base):
    """``{kind: (tensor, error type, pattern of the problem)}`` for a float64 tensor ``base``."""
    return {
        "meta": (base.to("meta"), ValueError, "meta"),
        "sparse_coo": (base.to_sparse(), TypeError, "dense"),
        "sparse_csr": (base.to_sparse_csr(), TypeError, "dense"),
        "quantized": (torch.quantize_per_tensor(base.float(), 0.1, 0, torch.quint8), TypeError,
                      "quantized"),
        "nested": (torch.nested.nested_tensor([base, base]), TypeError, "nested"),
        "complex": (base.to(torch.complex128), TypeError, "float32 or float64"),
        "float16": (base.half(), TypeError, "float32 or float64"),
        "bfloat16": (base.bfloat16(), TypeError, "float32 or float64"),
        "int64": (base.long(), TypeError, "float32 or float64"),
        "bool": (base > 0.5, TypeError, "float32 or float64"),
    }


UNSUPPORTED_KINDS = ["meta", "sparse_coo", "sparse_csr", "quantized", "nested", "complex",
                     "float16", "bfloat16", "int64", "bool"]


@pytest.fixture
def no_kernels(monkeypatch):
    """The C++ kernels replaced by a function that fails the test: the checks must come first."""
    from bedl_torch import _ext

    def reached(*args, **kwargs):
        raise AssertionError("a kernel ran on an unsupported input")

    for name in ("ted_cpu", "sed_cpu", "ted_symbols_cpu", "sed_symbols_cpu"):
        monkeypatch.setattr(_ext, name, reached)


def _tensor_entry_points(bad):
    """``(argument name, call)`` for every public entry point that takes a cost tensor, with
    ``bad`` (shaped ``(4, 3)`` for the pair X, Y) in that argument and good ones elsewhere."""
    C = good()
    batch = bedl_torch.PairBatch([X], [Y])
    yield "costs", lambda: bedl_torch.edit_distance(X, Y, bad)
    yield "costs", lambda: bedl_torch.coopt_matrix(X, Y, bad)
    yield "costs", lambda: bedl_torch.edit_distance("abc", "ab", bad)
    yield "costs", lambda: bedl_torch.pseudo_edit_distance(X, Y, bad, C)
    yield "reference_costs", lambda: bedl_torch.pseudo_edit_distance(X, Y, C, bad)
    yield "costs[1]", lambda: bedl_torch.edit_distance_batch([X, X], [Y, Y], [C, bad])
    yield "costs[0]", lambda: bedl_torch.coopt_matrix_batch([X], [Y], [bad])
    if bad.dim() == 2 and not bad.is_nested:
        padded = bad[None] if bad.layout == torch.strided else bad.to_dense()[None].to_sparse()
        yield "costs", lambda: bedl_torch.edit_distance_batch([X], [Y], padded)
        yield "costs", lambda: bedl_torch.coopt_matrix_batch([X], [Y], padded)
        yield "costs", lambda: batch.distances(padded)
        yield "costs", lambda: batch.coopt(padded)
        yield "reference", lambda: batch.distances(C[None], mode="pseudo", reference=padded)
        yield "coopt", lambda: batch.pseudo_distances(C[None], padded)


@pytest.mark.filterwarnings("ignore::UserWarning")  # sparse CSR is beta, quantization deprecated
@pytest.mark.parametrize("kind", UNSUPPORTED_KINDS)
def test_unsupported_cost_tensors_name_the_argument(kind, no_kernels):
    bad, error, problem = _unsupported(good())[kind]
    for name, call in _tensor_entry_points(bad):
        with pytest.raises(error) as info:
            call()
        message = str(info.value)
        assert name in message and re.search(problem, message), (kind, name, message)


def _bad_modules():
    """``{kind: (cost module over 'abc', error type, parameter or buffer named)}``."""
    from torch import nn

    from bedl_torch.evaluation.gesl import MatrixCost

    sparse = bedl_torch.EuclideanCost(list("abc"))
    sparse.embedding = nn.Parameter(sparse.embedding.detach().to_sparse())
    matrix = 1.0 - torch.eye(4, dtype=torch.float64)
    cosine = bedl_torch.CosineCost(list("abc"), torch.rand(3, 2, dtype=torch.float64))
    return {
        "euclidean_meta": (bedl_torch.EuclideanCost(list("abc")).to("meta"), ValueError,
                           "embedding"),
        "euclidean_half": (bedl_torch.EuclideanCost(list("abc")).half(), TypeError, "embedding"),
        "euclidean_bfloat16": (bedl_torch.EuclideanCost(list("abc")).bfloat16(), TypeError,
                               "embedding"),
        "euclidean_sparse": (sparse, TypeError, "embedding"),
        "unit_half": (bedl_torch.UnitCost(list("abc")).to(torch.float16), TypeError, "_anchor"),
        "unit_meta": (bedl_torch.UnitCost(list("abc")).to("meta"), ValueError, "_anchor"),
        "cosine_half": (cosine.half(), TypeError, "Omega"),
        "matrix_meta": (MatrixCost(list("abc"), matrix).to("meta"), ValueError, "matrix"),
        "matrix_half": (MatrixCost(list("abc"), matrix).half(), TypeError, "matrix"),
    }


MODULE_KINDS = list(_bad_modules())


@pytest.mark.parametrize("kind", MODULE_KINDS)
def test_unsupported_cost_modules_name_the_parameter(kind, no_kernels):
    from bedl_torch.learning import BEDL

    cost, error, tensor = _bad_modules()[kind]
    good_cost = bedl_torch.UnitCost(list("abc"))
    xs = ["ab", "ca"]
    batch = bedl_torch.PairBatch(xs, xs)
    P0 = torch.zeros(batch.shape, dtype=torch.float64)  # (no kernel may run here)
    calls = [
        ("cost", lambda: bedl_torch.pairwise_distances(xs, None, cost)),
        ("cost", lambda: bedl_torch.pairwise_distances([X], [Y], cost)),
        ("reference_cost", lambda: bedl_torch.pairwise_distances(xs, None, good_cost, mode="pseudo",
                                                                 reference_cost=cost)),
        ("cost", lambda: batch.distances(cost)),
        ("cost", lambda: batch.coopt(cost)),
        ("cost", lambda: batch.costs(cost)),
        ("cost", lambda: batch.distances(good_cost, mode="pseudo", reference=cost)),
        ("cost", lambda: batch.pseudo_distances(cost, P0)),
        ("cost", lambda: BEDL(cost=cost, max_rounds=1).fit(["ab", "ba", "cc", "ca"], [0, 0, 1, 1])),
    ]
    for name, call in calls:
        with pytest.raises(error) as info:
            call()
        message = str(info.value)
        assert f"{name}.{tensor}" in message, (kind, message)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", UNSUPPORTED_KINDS)
def test_cost_module_constructors_reject_unsupported_tensors(kind):
    """Tensors without readable real data are rejected by every constructor; EuclideanCost's
    embedding and CosineCost's vectors keep their dtype, so other dtypes are rejected there,
    while the documented conversions (integer vectors to the default dtype, any real Omega to
    the vectors' dtype, any real matrix to float64) still apply."""
    from bedl_torch.evaluation.gesl import MatrixCost

    base = torch.rand(3, 2, dtype=torch.float64)
    bad, error, problem = _unsupported(base)[kind]
    unreadable = kind in ("meta", "sparse_coo", "sparse_csr", "quantized", "nested", "complex")
    if kind == "complex":
        problem = "must be real"
    rejected = [("embedding", lambda: bedl_torch.EuclideanCost(list("abc"), bad))]
    converted = []
    if kind != "nested":
        square, _, _ = _unsupported(torch.rand(4, 4, dtype=torch.float64))[kind]
        omega, _, _ = _unsupported(torch.eye(2, dtype=torch.float64))[kind]
        make_matrix = lambda: MatrixCost(list("abc"), square)  # noqa: E731
        make_omega = lambda: bedl_torch.CosineCost(list("abc"), base, omega)  # noqa: E731
        if unreadable:
            rejected += [("matrix", make_matrix), ("omega", make_omega)]
        else:
            converted += [("matrix", make_matrix, "matrix"), ("omega", make_omega, "Omega")]
    if kind in ("int64", "bool"):
        converted.append(("vectors", lambda: bedl_torch.CosineCost(list("abc"), bad), "vectors"))
        problem = "floating point"  # EuclideanCost's own message for integer embeddings
    else:
        rejected.append(("vectors", lambda: bedl_torch.CosineCost(list("abc"), bad)))
    for name, call in rejected:
        with pytest.raises(error) as info:
            call()
        message = str(info.value)
        assert name in message and re.search(problem, message), (kind, name, message)
    for name, call, attribute in converted:
        tensor = getattr(call(), attribute)
        assert tensor.dtype in (torch.float32, torch.float64), (kind, name, tensor.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64, torch.int64,
                                   torch.bool])
def test_cost_module_dtype_arguments(dtype):
    from bedl_torch.evaluation.gesl import MatrixCost

    for call, name in [(lambda: bedl_torch.EuclideanCost(list("ab"), dtype=dtype), "dtype"),
                       (lambda: bedl_torch.EuclideanCost(list("ab"), torch.eye(2), dtype=dtype),
                        "dtype"),
                       (lambda: bedl_torch.UnitCost(list("ab"), dtype=dtype), "dtype"),
                       (lambda: MatrixCost(list("ab"), torch.ones(3, 3), dtype=dtype), "matrix")]:
        with pytest.raises(TypeError, match=f"{name} must be float32 or float64, got {dtype}"):
            call()


def test_non_finite_module_tensors_at_construction():
    from bedl_torch.evaluation.gesl import MatrixCost

    nan_rows = torch.tensor([[1.0, math.nan], [0.0, 1.0]], dtype=torch.float64)
    for call, name in [(lambda: bedl_torch.EuclideanCost(list("ab"), nan_rows), "embedding"),
                       (lambda: bedl_torch.CosineCost(list("ab"), nan_rows), "vectors"),
                       (lambda: bedl_torch.CosineCost(list("ab"), torch.eye(2),
                                                      nan_rows * math.inf), "omega"),
                       (lambda: MatrixCost(list("a"), nan_rows), "matrix")]:
        with pytest.raises(ValueError, match=f"{name} must be finite"):
            call()


@pytest.mark.parametrize("device, error, pattern", [
    ("meta", ValueError, "meta device"),
    ("no-such-device", ValueError, "not a device"),
    (1.5, TypeError, "must be None, a str"),
] + ([] if torch.cuda.is_available() else [("cuda", ValueError, "not available")]))
def test_device_arguments(device, error, pattern):
    from bedl_torch.learning import BEDL

    for call in [lambda: bedl_torch.EuclideanCost(list("ab"), device=device),
                 lambda: bedl_torch.UnitCost(list("ab"), device=device),
                 lambda: BEDL(device=device).fit(["ab", "ba"], [0, 1])]:
        with pytest.raises(error, match=f"device.*{pattern}|{pattern}.*device"):
            call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA for a second device")
def test_cost_module_on_two_devices():
    cost = bedl_torch.CosineCost(list("ab"), torch.eye(2, dtype=torch.float64))
    cost.Omega.data = cost.Omega.data.cuda()
    with pytest.raises(ValueError, match="one device"):
        bedl_torch.pairwise_distances(["ab"], ["b"], cost)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", ["meta", "sparse_coo", "quantized", "complex"])
def test_median_glvq_rejects_unsupported_distance_matrices(kind):
    from bedl_torch.learning import MedianGLVQ

    D = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 2.0], [2.0, 2.0, 0.0]], dtype=torch.float64)
    bad, error, problem = _unsupported(D)[kind]
    if kind == "complex":
        problem = "real"
    with pytest.raises(error) as info:
        MedianGLVQ().fit(bad, [0, 0, 1])
    assert "distance matrix" in str(info.value) and re.search(problem, str(info.value))
    with pytest.raises(TypeError, match="distance matrix must be real"):
        MedianGLVQ().fit(D.numpy() + 0j, [0, 0, 1])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_unsupported_tensor_kinds_give_their_documented_errors():
    """The shared checks themselves, on one tensor per kind (the table above)."""
    from bedl_torch import validation

    assert sorted(_unsupported(good())) == sorted(UNSUPPORTED_KINDS)
    for kind, (bad, error, problem) in _unsupported(good()).items():
        with pytest.raises(error, match=problem):
            validation.check_cost_tensor(bad, "costs")
    validation.check_cost_tensor(good(), "costs")
    validation.check_cost_tensor(good().float().t(), "costs")  # a transposed float32 view
    with pytest.raises(TypeError, match="costs must be a torch.Tensor, got list"):
        validation.check_cost_tensor([[0.0]], "costs")
    with pytest.raises(TypeError, match="cost must be a bedl_torch.SymbolCost module, got Linear"):
        bedl_torch.costs.base.check_cost_module(torch.nn.Linear(2, 2))


# ------------------------------------------------------------------------------ deep and cyclic input
@pytest.mark.parametrize("source", [
    "x = " + "-" * 20000 + "1",         # the parser's own stack (MemoryError in CPython 3.11)
    "x = " + "+".join(["a"] * 20000),   # AST construction (RecursionError)
    "x = " + "a." * 20000 + "b",
])
def test_from_python_too_deep_is_a_value_error(source):
    with pytest.raises(ValueError, match=f"nested too deeply.*{sys.getrecursionlimit()}"):
        Tree.from_python(source)


def test_from_python_deep_but_parsable():
    """500 nested unary minus: parsed, and the tree is the path Module-Assign-...-Constant."""
    t = Tree.from_python("x = " + "-" * 500 + "1")
    # Module, Assign, Name, Store, then 500 x (UnaryOp, USub) and the Constant
    assert len(t) == 4 + 2 * 500 + 1
    assert t.depth() == 2 + 500


def test_from_python_invalid_source_is_a_syntax_error():
    with pytest.raises(SyntaxError):
        Tree.from_python("def (:")


def test_from_json_too_deep_is_a_value_error(tmp_path):
    text = '{"nodes": ["a"], "adj": [' + "[" * 100000 + "]" * 100000 + "]}"
    with pytest.raises(ValueError, match="JSON nested too deeply"):
        Tree.from_json(text)
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="JSON nested too deeply"):
        Tree.load_json(path)


def test_self_containing_structures_are_value_errors():
    import ast

    loop = ["a", ("b",)]
    loop.append(loop)
    with pytest.raises(ValueError, match="cycle"):
        Tree.from_tuple(loop)
    module = ast.parse("x = [1]")
    module.body[0].value.elts.append(module)
    with pytest.raises(ValueError, match="cycle"):
        Tree.from_python(module)
    # a shared (not self-containing) subtree is two copies of it
    leaf = ("b",)
    assert Tree.from_tuple(("a", leaf, ("c", leaf))) == Tree.from_bracket("{a{b}{c{b}}}")


# ------------------------------------------------------------------------------ learning on odd data
def test_median_glvq_rejects_negative_and_infinite_training_distances():
    from bedl_torch.learning import MedianGLVQ

    D = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 2.0], [2.0, 2.0, 0.0]])
    for where, value, pattern in [((0, 1), -0.5, "negative entries"), ((2, 0), math.inf, "inf"),
                                  ((1, 1), math.nan, "NaN")]:
        bad = D.copy()
        bad[where] = value
        with pytest.raises(ValueError, match=f"distance matrix .*{pattern}|{pattern}"):
            MedianGLVQ().fit(bad, [0, 0, 1])
    # prediction only takes an argmin: distances of any sign are fine there
    model = MedianGLVQ().fit(D, [0, 0, 1])
    assert model.predict(-D).tolist() == [1, 1, 0]


@pytest.mark.parametrize("init, error, pattern", [
    ([0, 3], ValueError, r"indices in \[0, 3\)"),
    ([-1, 2], ValueError, r"indices in \[0, 3\)"),
    ([0.0, 2.0], TypeError, "int indices"),
    ([[0], [2]], TypeError, "int indices"),
    ([0, 0, 2], ValueError, "distinct"),
])
def test_median_glvq_initial_prototypes(init, error, pattern):
    from bedl_torch.learning import MedianGLVQ

    D = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 2.0], [2.0, 2.0, 0.0]])
    with pytest.raises(error, match=pattern):
        MedianGLVQ().fit(D, [0, 0, 1], init_prototypes=init)
    # a valid warm start: points 0 and 1 are symmetric, so no move gains and it stays
    assert MedianGLVQ().fit(D, [0, 0, 1], init_prototypes=[1, 2]).prototypes_.tolist() == [1, 2]


@pytest.mark.parametrize("mode", ["pseudo", "exact"])
def test_bedl_on_empty_sequences_has_nothing_to_learn(mode):
    """All objects empty: an empty alphabet and embedding; every distance is 0, so the fit
    stops at once and predicts the first prototype's class."""
    from bedl_torch.learning import BEDL

    model = BEDL(mode=mode, max_rounds=2, max_eval=3).fit(["", [], ()], [0, 1, 1])
    assert model.stop_reason_ == "no parameters to learn" and model.n_rounds_ == 0
    assert model.alphabet_ == [] and model.cost_.embedding.numel() == 0
    np.testing.assert_array_equal(model.decision_distances(["", []]), np.zeros((2, 2)))
    assert model.predict(["", []]).tolist() == [0, 0]


def test_pseudo_distances_that_overflow_are_value_errors():
    """Pseudo distances sum P0 * C outside the kernels: where that sum overflows (each cost
    finite, three of them at 0.9 of float32's largest value), a ValueError, not inf."""
    from bedl_torch.evaluation.gesl import MatrixCost

    big = 0.9 * torch.finfo(torch.float32).max
    C = torch.full((3, 2), big, dtype=torch.float32)
    reference = torch.zeros(3, 2, dtype=torch.float32)
    with pytest.raises(ValueError, match="the pseudo distance overflowed torch.float32"):
        bedl_torch.pseudo_edit_distance("ab", "a", C, reference)
    # P0 at zero costs is finite; below the overflow the same call gives sum(P0 * C)
    _, P0 = bedl_torch.coopt_matrix("ab", "a", reference)
    small = torch.full((3, 2), 1e30, dtype=torch.float32)
    assert float(bedl_torch.pseudo_edit_distance("ab", "a", small, reference)) == \
        pytest.approx(float((P0 * small).sum()), rel=1e-6)
    cost = MatrixCost(["a"], torch.full((2, 2), big), dtype=torch.float32)
    zero = MatrixCost(["a"], torch.zeros(2, 2), dtype=torch.float32)
    with pytest.raises(ValueError, match=r"pseudo distances of pairs \[0\] overflowed"):
        bedl_torch.pairwise_distances([["a", "a"]], [["a"]], cost, mode="pseudo",
                                      reference_cost=zero)


def test_rel_tol_too_small_for_the_costs_rounding_is_a_value_error():
    """Each co-optimal mapping is counted in one order of its edits. With rel_tol=0 and costs
    whose sums round (0.1, 0.2, 0.3), that order can cost an ulp more than another one, so no
    mapping survives the tie test: a ValueError naming the pair and rel_tol, not an internal
    error. The default tolerance counts the same pair (P's rows of x sum to 1)."""

    class Table(bedl_torch.SymbolCost):
        def __init__(self, table):
            super().__init__(["a", "b"])
            self.register_buffer("table", table)

        def symbol_table(self):
            return self.table

        def forward(self, x_idx, y_idx):
            return self.table[x_idx[:, :, None], y_idx[:, None, :]]

    x = Tree(["b", "b", "a", "b", "b", "a"], [[1, 3, 5], [2], [], [4], [], []])
    y = Tree(["a", "a"], [[1], []])
    cost = Table(torch.tensor([[0.0, 0.3, 0.1], [0.3, 0.0, 0.2], [0.1, 0.2, 0.0]], dtype=torch.float64))
    batch = bedl_torch.PairBatch([x], [y])
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"pair of 6 and 2 nodes: no co-optimal mapping .* rel_tol=0"):
            batch.coopt(cost, rel_tol=0.0)
        d, P = batch.coopt(cost)
    assert torch.allclose(P[0, :6, :3].sum(dim=1), torch.ones(6, dtype=torch.float64))
    # matching y's two a's costs 0.3 at least (x's a's are not ancestor and descendant), and
    # every mapping then deletes 0.6 of b's and 0.1 of a; matching one a instead inserts the
    # other (0.1) and deletes 0.8 of b's and 0.1 of a: all cost 1.0
    assert torch.isclose(d[0], torch.tensor(1.0, dtype=torch.float64))


def test_pairwise_chunk_size_must_be_an_int():
    with pytest.raises(ValueError, match=r"chunk_size must be an int >= 1, got 2\.5"):
        bedl_torch.pairwise_distances([X], [Y], chunk_size=2.5)
    with pytest.raises(ValueError, match=r"chunk_size must be an int >= 1, got True"):
        bedl_torch.pairwise_distances([X], [Y], chunk_size=True)
    D = bedl_torch.pairwise_distances([X, Y], chunk_size=np.int64(1))
    assert torch.equal(D, bedl_torch.pairwise_distances([X, Y]))


def test_cosine_cost_eps_must_be_finite_and_positive():
    from bedl_torch.costs import CosineCost

    for eps in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match=r"eps .* must be finite and > 0"):
            CosineCost(["a", "b"], torch.rand(2, 3), eps=eps)


def _unfitted_calls():
    from bedl_torch.learning import BEDL, MedianGLVQ

    yield lambda: BEDL().predict([X])
    yield lambda: BEDL().pairwise_distances([X])
    yield lambda: MedianGLVQ().predict(np.zeros((1, 2)))
    yield lambda: MedianGLVQ().decision_distances(np.zeros((1, 2)))


@pytest.mark.parametrize("call", list(_unfitted_calls()))
def test_unfitted_estimators_raise_not_fitted_error(call):
    """A ValueError and an AttributeError, as scikit-learn's NotFittedError (was RuntimeError)."""
    from bedl_torch.learning import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted yet; call fit first") as info:
        call()
    assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)


def test_nan_class_labels_are_value_errors():
    """np.unique keeps every NaN apart (NaN != NaN): fitted, it made a class of no members."""
    from bedl_torch.learning import BEDL, MedianGLVQ

    trees = [X, Y, X, Y]
    with pytest.raises(ValueError, match=r"y contains NaN \(entry 2\)"):
        BEDL(max_rounds=0).fit(trees, [0.0, 1.0, math.nan, 1.0])
    with pytest.raises(ValueError, match=r"y contains NaN \(entry 0\)"):
        MedianGLVQ().fit(np.zeros((4, 4)), np.array([math.nan, 1.0, 0.0, 1.0]))
    pytest.importorskip("sklearn")
    from bedl_torch.evaluation.classifiers import GoodnessClassifier, KNNClassifier, SVMClassifier

    for classifier in (KNNClassifier, SVMClassifier, GoodnessClassifier):
        with pytest.raises(ValueError, match=r"y contains NaN \(entry 3\)"):
            classifier().fit(np.zeros((4, 4)), [0.0, 1.0, 0.0, math.nan])


@pytest.mark.parametrize("seed, error", [("x", TypeError), (1.5, TypeError), (True, TypeError), (-1, ValueError)])
def test_random_state_is_checked_by_fit(seed, error):
    from bedl_torch.learning import BEDL, MedianGLVQ

    with pytest.raises(error, match="random_state must be None, an int >= 0 or a numpy Generator"):
        BEDL(max_rounds=0, random_state=seed).fit([X, Y], [0, 1])
    with pytest.raises(error, match="random_state must be None, an int >= 0 or a numpy Generator"):
        MedianGLVQ(random_state=seed).fit(np.zeros((2, 2)), [0, 1])


def test_a_cost_module_that_returns_no_tensor_is_a_type_error():
    from bedl_torch.costs import SymbolCost

    class ReturnsArray(SymbolCost):
        def forward(self, x_idx, y_idx):
            return np.zeros((x_idx.shape[0], x_idx.shape[1], y_idx.shape[1]))

    with pytest.raises(TypeError, match="the symbol table of ReturnsArray must be a torch.Tensor, got ndarray"):
        bedl_torch.pairwise_distances(["ab", "b"], cost=ReturnsArray(list("ab")))


def test_score_needs_one_label_per_object():
    """numpy broadcast a single label, or a column of labels, against the predictions: a
    score of nothing in particular, silently."""
    from bedl_torch.learning import BEDL, MedianGLVQ

    trees, y = [X, Y, X, Y], np.array([0, 1, 0, 1])
    model = BEDL(max_rounds=0).fit(trees, y)
    assert model.score(trees, y) == float(np.mean(model.predict(trees) == y))
    for bad in ([0], y[:, None], y[:3]):
        with pytest.raises(ValueError, match=r"y must be 1-D with 4 labels \(one per object\)"):
            model.score(trees, bad)
    D = np.array([[0.0, 2.0, 1.0, 3.0], [2.0, 0.0, 3.0, 1.0], [1.0, 3.0, 0.0, 2.0], [3.0, 1.0, 2.0, 0.0]])
    glvq = MedianGLVQ().fit(D, y)
    assert glvq.score(D, y) == float(np.mean(glvq.predict(D) == y))
    with pytest.raises(ValueError, match=r"y must be 1-D with 4 labels"):
        glvq.score(D, y[:, None])

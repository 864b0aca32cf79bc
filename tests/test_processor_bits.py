"""The kernels give the same bits on every x86-64 processor (docs/api-contract.md): digests of
their outputs on fixed inputs, compared with digests written here.

The inputs are built with Python's exact arithmetic only (integers, one correctly rounded
division each, float64 -> float32 conversion), never with numpy, torch or BLAS arithmetic,
and the outputs are the C++ kernels' own (distances, co-optimal matrices P, symbol-table
distances), so nothing processor-dependent enters before or after them. A digest that differs
on some machine means the kernels' arithmetic depends on the processor there. After a change
that is meant to move bits (a new summation order), print the new digests with
``PYTHONPATH=. python tests/test_processor_bits.py`` and say why in the commit.
"""
import hashlib
import random

import torch

import bedl_torch as bt
from test_symbol_grad import TableCost  # a whole symbol table handed to the kernels

#: sha256 of each case's outputs (first 16 hex digits), computed on an Intel Xeon (AVX-512)
#: with the AVX2 paths on and off; the same on every x86-64 processor by the contract
EXPECTED = {
    "tree/float64/integer/distance": "8e08f0044efea719",
    "tree/float64/integer/coopt": "57adb9292330a9f4",
    "tree/float64/tenths/distance": "64fa658c523553fd",
    "tree/float64/tenths/coopt": "167d3a0845d95908",
    "tree/float64/dyadic/distance": "e94a6e71ae200538",
    "tree/float64/dyadic/coopt": "ce6cd87504e4ac0e",
    "tree/float64/signed/distance": "0f1d77da0eec5579",
    "tree/float64/signed/coopt": "06e7fa65313a52cb",
    "tree/float64/symbols/unit/pairwise": "f8f3dce236820d9d",
    "tree/float64/symbols/unit/coopt": "af86c9086f643825",
    "tree/float64/symbols/table/pairwise": "33f25956d652a4f0",
    "tree/float64/symbols/table/coopt": "aa6fd2dcafb80c88",
    "tree/float32/integer/distance": "0576ebf3e918ad66",
    "tree/float32/integer/coopt": "1c880a86636d5e37",
    "tree/float32/tenths/distance": "91d627e8b85804db",
    "tree/float32/tenths/coopt": "50fc96250e456cd5",
    "tree/float32/dyadic/distance": "bd06d9d761251c01",
    "tree/float32/dyadic/coopt": "cf50245f1cbaf928",
    "tree/float32/signed/distance": "fe0d6aab8015f9b8",
    "tree/float32/signed/coopt": "0a00c8c24b837454",
    "tree/float32/symbols/unit/pairwise": "b13e04388929c3ee",
    "tree/float32/symbols/unit/coopt": "32289506f8ae3799",
    "tree/float32/symbols/table/pairwise": "1719441a30688d1c",
    "tree/float32/symbols/table/coopt": "18596f8a9d6704a0",
    "seq/float64/integer/distance": "c4fad655c1934bb8",
    "seq/float64/integer/coopt": "e087ac261d57e689",
    "seq/float64/tenths/distance": "58667d447581cde9",
    "seq/float64/tenths/coopt": "780355dd1f93e58b",
    "seq/float64/dyadic/distance": "a3ea307e7a9279e0",
    "seq/float64/dyadic/coopt": "a29d5db3396092b7",
    "seq/float64/signed/distance": "d059cb155cd7bbea",
    "seq/float64/signed/coopt": "23bce6fee5fcb010",
    "seq/float64/symbols/unit/pairwise": "4e4b27ee9b8f36a9",
    "seq/float64/symbols/unit/coopt": "c0cf848a432e2363",
    "seq/float64/symbols/table/pairwise": "7889ae7f2c6f9f32",
    "seq/float64/symbols/table/coopt": "791afb2f567238f5",
    "seq/float32/integer/distance": "991ed22c617a1179",
    "seq/float32/integer/coopt": "6c28b8659ac5eee5",
    "seq/float32/tenths/distance": "798a3e29c765ea53",
    "seq/float32/tenths/coopt": "17e681074d7a0e31",
    "seq/float32/dyadic/distance": "12439f71dcb4a0b1",
    "seq/float32/dyadic/coopt": "f28621d7f017f4cf",
    "seq/float32/signed/distance": "101b3ccb0c8b7b7d",
    "seq/float32/signed/coopt": "5d9a13d0bc8b5dd6",
    "seq/float32/symbols/unit/pairwise": "863e6c9b6d934c09",
    "seq/float32/symbols/unit/coopt": "748b64f92d6fc1aa",
    "seq/float32/symbols/table/pairwise": "a17ad2359fd09596",
    "seq/float32/symbols/table/coopt": "21072c269efa72bc",
}


def _tree(rnd, n, alphabet):
    labels = [rnd.choice(alphabet) for _ in range(n)]
    children = [[] for _ in range(n)]
    stack = [0]
    for k in range(1, n):
        depth = rnd.randrange(len(stack))
        children[stack[depth]].append(k)
        del stack[depth + 1:]
        stack.append(k)
    return bt.Tree(labels, children)


def _objects(kind, rnd):
    if kind == "tree":
        pairs = [(_tree(rnd, rnd.randint(1, 40), "abcd"), _tree(rnd, rnd.randint(1, 40), "abcd"))
                 for _ in range(16)]
        pairs.append((_tree(rnd, 90, "abc"), _tree(rnd, 80, "abc")))
    else:
        pairs = [([rnd.choice("abcd") for _ in range(rnd.randint(0, 60))],
                  [rnd.choice("abcd") for _ in range(rnd.randint(0, 60))]) for _ in range(16)]
        pairs.append((["ab"[rnd.getrandbits(1)] for _ in range(300)],
                      ["ab"[rnd.getrandbits(1)] for _ in range(280)]))
    return pairs


def _value(rnd, kind):
    if kind == "integer":
        return float(rnd.randint(0, 2))
    if kind == "tenths":
        return rnd.randint(1, 9) / 10
    if kind == "dyadic":
        return rnd.getrandbits(20) / 2 ** 20
    return rnd.randint(-2 ** 19, 2 ** 19) / 2 ** 19 + rnd.randint(1, 9) / 10  # signed, inexact sums


def _costs(x, y, kind, rnd, dtype):
    m, n = len(x), len(y)
    rows = [[_value(rnd, kind) for _ in range(n + 1)] for _ in range(m + 1)]
    rows[m][n] = 0.0
    return torch.tensor(rows, dtype=torch.float64).to(dtype)


def _digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def case_outputs():
    """``{case: digest}`` for every case."""
    out = {}
    for kind in ("tree", "seq"):
        for dtype in (torch.float64, torch.float32):
            for cost_kind in ("integer", "tenths", "dyadic", "signed"):
                rnd = random.Random(f"{kind}/{cost_kind}")
                pairs = _objects(kind, rnd)
                xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
                costs = [_costs(x, y, cost_kind, rnd, dtype) for x, y in pairs]
                tag = f"{kind}/{str(dtype)[6:]}/{cost_kind}"
                out[f"{tag}/distance"] = _digest([bt.edit_distance_batch(xs, ys, costs)])
                d, P = bt.coopt_matrix_batch(xs, ys, costs)
                out[f"{tag}/coopt"] = _digest([d, *P])
            rnd = random.Random(f"{kind}/symbols")
            alphabet = list("abcdefg")
            if kind == "tree":
                X = [_tree(rnd, rnd.randint(5, 30), alphabet) for _ in range(12)]
            else:
                X = [[rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))] for _ in range(12)]
            table = torch.tensor([[rnd.randint(-2, 5) / 4 + rnd.getrandbits(10) / 2 ** 12
                                   for _ in range(8)] for _ in range(8)], dtype=dtype)
            for name, cost in (("unit", bt.UnitCost(alphabet, dtype=dtype)),
                               ("table", TableCost(alphabet, table))):
                tag = f"{kind}/{str(dtype)[6:]}/symbols/{name}"
                with torch.no_grad():
                    out[f"{tag}/pairwise"] = _digest([bt.pairwise_distances(X, X[:5], cost)])
                d, P = bt.PairBatch(X[:6], X[6:]).coopt(cost)
                out[f"{tag}/coopt"] = _digest([d, *P])
    return out


def test_kernel_outputs_have_the_written_digests():
    got = case_outputs()
    assert set(got) == set(EXPECTED), "the cases changed: print the digests again"
    differ = sorted(k for k in got if got[k] != EXPECTED[k])
    assert not differ, (f"{len(differ)} of {len(got)} cases give other bits on this processor "
                        f"than the written digests: {differ}")


if __name__ == "__main__":
    for key, value in case_outputs().items():
        print(f'    "{key}": "{value}",')

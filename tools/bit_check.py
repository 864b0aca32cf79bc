"""The bit check: every kernel path's outputs on fixed inputs, written to a file, and two such
files compared bit for bit. A refactor of the kernels must leave them all equal.

    python tools/bit_check.py dump base.npz      # in the tree of the build before the change
    python tools/bit_check.py dump head.npz      # after it
    python tools/bit_check.py compare base.npz head.npz

Covers distances, co-optimal matrices P, gradients (through both symbol-table backward paths:
lists kept in forward, and recomputed for a sparse loss) and soft distances with their
gradients; trees and sequences; padded and symbol-table costs; float32 and float64; unit,
integer, tenths, arbitrary and signed costs; count overflow (massive ties); the AVX2 paths on
and off; 1 and 2 threads. Only the public API is used, so both builds may differ inside.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import bedl_torch as bt
from bedl_torch import _ext


def _tree(n, alphabet, rng):
    labels = [alphabet[int(k)] for k in rng.integers(0, len(alphabet), size=n)]
    children = [[] for _ in range(n)]
    stack = [0]
    for k in range(1, n):
        depth = int(rng.integers(0, len(stack)))
        parent = stack[depth]
        del stack[depth + 1:]
        children[parent].append(k)
        stack.append(k)
    return bt.Tree(labels, children)


def _path(n, label):
    return bt.Tree([label] * n, [[i + 1] for i in range(n - 1)] + [[]])


def _comb(n, label):
    children = [[] for _ in range(n)]
    i = 0
    while i + 1 < n:
        children[i].append(i + 1)
        if i + 2 < n:
            children[i].append(i + 2)
        i += 2
    return bt.Tree([label] * n, children)


def _seq(n, alphabet, rng):
    return [alphabet[int(k)] for k in rng.integers(0, len(alphabet), size=n)]


def _size(obj):
    return len(obj)


def _costs(x, y, kind, rng, dtype):
    m, n = _size(x), _size(y)
    if kind == "integer":
        C = rng.integers(0, 3, size=(m + 1, n + 1)).astype(np.float64)
    elif kind == "tenths":
        C = rng.integers(1, 10, size=(m + 1, n + 1)) / 10.0
    elif kind == "arbitrary":
        C = rng.random((m + 1, n + 1))
    elif kind == "signed":
        C = rng.uniform(-1.0, 1.0, size=(m + 1, n + 1))
    else:
        raise ValueError(kind)
    C[m, n] = 0.0
    return torch.tensor(C, dtype=dtype)


def _objects(kind, rng):
    """Pairs of objects: random shapes of 1-40 nodes, and paths, combs and long ones."""
    pairs = []
    for _ in range(24):
        if kind == "tree":
            pairs.append((_tree(int(rng.integers(1, 41)), "abcd", rng),
                          _tree(int(rng.integers(1, 41)), "abcd", rng)))
        else:
            pairs.append((_seq(int(rng.integers(0, 60)), "abcd", rng),
                          _seq(int(rng.integers(0, 60)), "abcd", rng)))
    if kind == "tree":
        pairs += [(_path(30, "a"), _comb(31, "a")), (_comb(40, "b"), _tree(35, "ab", rng)),
                  (_tree(100, "abc", rng), _tree(90, "abc", rng))]
    else:
        pairs += [(_seq(300, "ab", rng), _seq(280, "ab", rng))]
    return pairs


def padded_paths(out, kind, dtype, tag):
    rng = np.random.default_rng(1)
    pairs = _objects(kind, rng)
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    for ck in ("integer", "tenths", "arbitrary", "signed"):
        costs = [_costs(x, y, ck, rng, dtype) for x, y in pairs]
        d = bt.edit_distance_batch(xs, ys, costs)
        out[f"{tag}/padded/{ck}/d"] = d.numpy()
        d2, P = bt.coopt_matrix_batch(xs, ys, costs)
        out[f"{tag}/padded/{ck}/d_coopt"] = d2.numpy()
        for k, p in enumerate(P):
            out[f"{tag}/padded/{ck}/P{k}"] = p.numpy()
        if ck != "signed":
            soft_costs = [c.clone().requires_grad_(True) for c in costs]
            s = bt.soft_edit_distance_batch(xs, ys, soft_costs, 0.5)
            s.sum().backward()
            out[f"{tag}/soft/{ck}/d"] = s.detach().numpy()
            for k, c in enumerate(soft_costs):
                out[f"{tag}/soft/{ck}/grad{k}"] = c.grad.numpy()


class SignedTableCost(bt.SymbolCost):
    """A learnable symbol table with entries of both signs (the kernels' general tie test)."""

    def __init__(self, alphabet, table):
        super().__init__(alphabet)
        self.table = torch.nn.Parameter(table)

    @property
    def dtype(self):
        return self.table.dtype

    @property
    def device(self):
        return self.table.device

    def symbol_table(self):
        return self.table

    def forward(self, x_idx, y_idx):
        return self.table[x_idx[:, :, None], y_idx[:, None, :]]


def symbol_paths(out, kind, dtype, tag):
    rng = np.random.default_rng(2)
    if kind == "tree":
        X = [_tree(int(rng.integers(5, 31)), "abcdefg", rng) for _ in range(14)]
    else:
        X = [_seq(int(rng.integers(0, 40)), "abcdefg", rng) for _ in range(14)]
    Y = X[:5]
    for cost_name in ("unit", "euclidean", "signed"):
        if cost_name == "unit":
            cost = bt.UnitCost(list("abcdefg"), dtype=dtype)
        elif cost_name == "signed":
            table = torch.tensor(np.random.default_rng(4).integers(-2, 6, size=(8, 8)) / 4.0, dtype=dtype)
            cost = SignedTableCost(list("abcdefg"), table)
        else:
            emb = torch.tensor(np.random.default_rng(3).normal(size=(7, 3)), dtype=dtype)
            cost = bt.EuclideanCost(list("abcdefg"), embedding=emb)
        D = bt.pairwise_distances(X, Y, cost)
        out[f"{tag}/symbols/{cost_name}/D"] = D.detach().numpy()
        d, P = bt.PairBatch(X[:5], Y[::-1]).coopt(cost)
        out[f"{tag}/symbols/{cost_name}/coopt_d"] = d.detach().numpy()
        for k, p in enumerate(P):
            out[f"{tag}/symbols/{cost_name}/P{k}"] = p.detach().numpy()
        if cost_name != "unit":
            W = torch.tensor(rng.random((len(X), len(Y))), dtype=dtype)
            for rep in range(3):  # dense losses: the forward keeps the lists after the first
                cost.zero_grad()
                (bt.pairwise_distances(X, Y, cost) * W).sum().backward()
                out[f"{tag}/symbols/{cost_name}/dense{rep}/grad"] = next(cost.parameters()).grad.numpy().copy()
            cost.zero_grad()
            D = bt.pairwise_distances(X, Y, cost)
            (D[:, 0] - D[:, 1]).sum().backward()  # a sparse loss: backward recomputes
            out[f"{tag}/symbols/{cost_name}/sparse/grad"] = next(cost.parameters()).grad.numpy().copy()


def overflow_paths(out, tag):
    """Counts past 2^1024: long equal-cost alternatives (replacing costs what a deletion plus
    an insertion costs)."""
    for kind in ("seq", "tree"):
        if kind == "seq":
            x, y = ["a"] * 700, ["b"] * 700
        else:
            x, y = _path(520, "a"), _path(520, "b")
        m, n = len(x), len(y)
        C = torch.ones(m + 1, n + 1, dtype=torch.float64)
        C[:m, :n] = 2.0
        C[m, n] = 0.0
        d, P = bt.coopt_matrix_batch([x], [y], [C])
        out[f"{tag}/overflow/{kind}/d"] = d.numpy()
        out[f"{tag}/overflow/{kind}/P"] = P[0].numpy()


def dump(path):
    out = {}
    for simd in (True, False):
        _ext.set_simd_enabled(simd)
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for kind in ("tree", "seq"):
                for dtype in (torch.float64, torch.float32):
                    tag = f"simd{int(simd)}/t{threads}/{kind}/{str(dtype)[6:]}"
                    padded_paths(out, kind, dtype, tag)
                    symbol_paths(out, kind, dtype, tag)
            if threads == 1:
                overflow_paths(out, f"simd{int(simd)}")
    _ext.set_simd_enabled(True)
    np.savez_compressed(path, **out)
    print(f"{path}: {len(out)} arrays")


def compare(a_path, b_path) -> int:
    a, b = np.load(a_path), np.load(b_path)
    names = sorted(set(a.files) | set(b.files))
    differ = []
    for name in names:
        if name not in a.files or name not in b.files:
            differ.append(f"{name}: only in {'the first' if name in a.files else 'the second'}")
            continue
        x, y = a[name], b[name]
        if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
            diff = np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))) if x.shape == y.shape else "shape"
            differ.append(f"{name}: differs (max abs {diff})")
    for line in differ:
        print(line)
    print(f"{len(names)} arrays, {len(differ)} differ")
    return 1 if differ else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("path")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args(argv)
    if args.cmd == "dump":
        dump(args.path)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())

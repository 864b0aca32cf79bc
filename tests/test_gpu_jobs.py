"""The GPU backend's logic on any machine: tests/cuda/host_jobs.cpp compiles the per-thread jobs
of the CUDA kernels (csrc/cuda/*/jobs.h: common/'s passes, the workspace slicing, the status
codes, the fallback to counts with exponents) for the host and runs every thread index of a
launch; its distances and co-optimal matrices must equal the CPU operators' bit for bit."""
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

from bedl_torch import _C, _ext
from oracles import random_tree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OK, NOT_FINITE, TOO_LARGE = 0, 1, 2


@pytest.fixture(scope="module")
def host_jobs(tmp_path_factory):
    cxx = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("host_jobs") / "host_jobs"
    proc = subprocess.run([cxx, "-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
                           "-DBEDL_LANE_BOUNDS", f"-I{REPO}/csrc",
                           os.path.join(REPO, "tests", "cuda", "host_jobs.cpp"), "-o", str(exe)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return str(exe)


def _run(exe, tmp_path, kind, dtype, need_coopt, rel_tol, threads, arrays, batch, rows, cols, max_m, max_n,
         table_shape=(0, 0)):
    """Writes the inputs, runs every thread of a launch on the host, returns (d, p, status)."""
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(tmp_path / name)
    tag = "f64" if dtype == torch.float64 else "f32"
    (tmp_path / "args.txt").write_text(
        f"{kind} {tag} {int(need_coopt)} {rel_tol!r} {threads} {batch} {rows} {cols} {max_m} {max_n} {table_shape[0]} {table_shape[1]}\n")
    for name in ("d", "p", "status"):
        (tmp_path / name).unlink(missing_ok=True)
    subprocess.run([exe, str(tmp_path)], check=True, timeout=300)
    np_dtype = np.float64 if dtype == torch.float64 else np.float32
    d = torch.from_numpy(np.fromfile(tmp_path / "d", dtype=np_dtype))
    # (the register-row kernel writes no statuses: the glue checks a symbol table whole)
    status = np.fromfile(tmp_path / "status", dtype=np.int32) if (tmp_path / "status").exists() else None
    p = torch.from_numpy(np.fromfile(tmp_path / "p", dtype=np_dtype)).reshape(batch, rows, cols) if need_coopt else None
    return d, p, status


def _sequences(rng, count, lengths, symbols):
    seqs = [rng.integers(0, symbols, int(rng.integers(lengths[0], lengths[1] + 1))) for _ in range(count)]
    ptr = np.zeros(count + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(s) for s in seqs])
    labels = np.concatenate(seqs).astype(np.int64) if ptr[-1] else np.zeros(0, dtype=np.int64)
    return labels, ptr


def _tables(rng, y_symbols=5):
    """Tables of five x symbols by ``y_symbols`` y symbols, each side's gap last."""
    shape = (6, y_symbols + 1)
    yield torch.as_tensor(rng.integers(0, 3, shape), dtype=torch.float64)  # integers: many ties
    yield torch.as_tensor(rng.integers(1, 3, shape), dtype=torch.float32)
    yield torch.as_tensor(rng.random(shape), dtype=torch.float64)
    yield torch.as_tensor(rng.normal(size=shape), dtype=torch.float32)  # signed costs
    yield torch.as_tensor(np.round(rng.random(shape), 1), dtype=torch.float64)  # tenths: rounding in sums


@pytest.mark.parametrize("need_coopt", [False, True])
@pytest.mark.parametrize("threads", [1, 5, 64])
@pytest.mark.parametrize("y_symbols", [5, 2])  # a square table and a rectangular one
def test_symbol_sequences_match_cpu_bit_for_bit(host_jobs, tmp_path, need_coopt, threads, y_symbols):
    rng = np.random.default_rng(3)
    xl, xp = _sequences(rng, 9, (0, 14), 5)
    yl, yp = _sequences(rng, 7, (0, 14), y_symbols)
    px = torch.as_tensor(rng.integers(0, 9, 40))
    py = torch.as_tensor(rng.integers(0, 7, 40))
    xl_t, xp_t, yl_t, yp_t = map(torch.as_tensor, (xl, xp, yl, yp))
    for table in _tables(rng, y_symbols):
        d_cpu, p_cpu = _ext.sed_symbols_cpu(table, xl_t, xp_t, yl_t, yp_t, px, py, need_coopt, 1e-9)
        m = (xp[1:] - xp[:-1])[px.numpy()]
        n = (yp[1:] - yp[:-1])[py.numpy()]
        rows, cols = int(m.max()) + 1, int(n.max()) + 1
        arrays = {"table": table.numpy(), "x_labels": xl, "x_ptr": xp, "y_labels": yl, "y_ptr": yp,
                  "pair_x": px.numpy(), "pair_y": py.numpy()}
        d, p, status = _run(host_jobs, tmp_path, "symbols", table.dtype, need_coopt, 1e-9, threads, arrays,
                            len(px), rows, cols, rows - 1, cols - 1, table_shape=table.shape)
        assert (status == OK).all()
        assert torch.equal(d, d_cpu)
        if need_coopt:
            assert p_cpu.shape == (len(px), rows, cols)
            assert torch.equal(p, p_cpu)


def _check_symbol_distances(host_jobs, tmp_path, kind, launches, rng, x_lengths, y_longest, y_symbols, pairs,
                            max_n):
    """A distance kernel `kind` (run with `launches` threads or warps) against the CPU kernel's
    bits: x of ``x_lengths`` symbols, y up to ``y_longest`` (one exactly that long, in the first
    pairs), over tables with ties, signed costs and float32; the kernel's width from max_n."""
    xl, xp = _sequences(rng, 6, x_lengths, 5)
    yl, yp = _sequences(rng, 8, (0, y_longest), y_symbols)
    yl = np.concatenate([yl, rng.integers(0, y_symbols, y_longest)])
    yp = np.concatenate([yp, [yp[-1] + y_longest]])
    px = torch.as_tensor(rng.integers(0, 6, pairs))
    py = torch.as_tensor(rng.integers(0, len(yp) - 1, pairs))
    py[:3] = len(yp) - 2
    tensors = tuple(map(torch.as_tensor, (xl, xp, yl, yp)))
    arrays = {"x_labels": xl, "x_ptr": xp, "y_labels": yl, "y_ptr": yp, "pair_x": px.numpy(), "pair_y": py.numpy()}
    max_m = int((xp[1:] - xp[:-1]).max())
    for table in _tables(rng, y_symbols):
        d_cpu, _ = _ext.sed_symbols_cpu(table, *tensors, px, py, False, 1e-9)
        d, _, status = _run(host_jobs, tmp_path, kind, table.dtype, False, 1e-9, launches,
                            dict(arrays, table=table.numpy()), len(px), 1, 1, max_m, max_n, table_shape=table.shape)
        assert status is None  # (these kernels write none: the glue checks a symbol table whole)
        assert torch.equal(d, d_cpu)


@pytest.mark.parametrize("threads", [1, 5, 64])
@pytest.mark.parametrize("y_symbols", [5, 2])
@pytest.mark.parametrize("longest, width", [(0, 8), (8, 8), (9, 16), (16, 32), (33, 48), (40, 64), (64, 64)])
def test_register_row_distances_match_cpu_bit_for_bit(host_jobs, tmp_path, threads, y_symbols, longest, width):
    """The register-row distance kernel (sequences y of at most `width` symbols, the row in a
    fixed array): the CPU kernel's distances to the bit at each width, y as long as the width
    and shorter."""
    _check_symbol_distances(host_jobs, tmp_path, "symbols_short", threads, np.random.default_rng(longest), (0, 20),
                            longest, y_symbols, 60, width)


@pytest.mark.parametrize("warps", [1, 3])
@pytest.mark.parametrize("longest_x, longest_y, max_n", [
    (0, 0, 100), (5, 3, 100), (40, 128, 128), (40, 129, 256), (30, 256, 256),  # one pass
    (70, 513, 600), (20, 1100, 1100)])  # several passes (512 columns each) through the boundary
def test_warp_per_pair_distances_match_cpu_bit_for_bit(host_jobs, tmp_path, warps, longest_x, longest_y, max_n):
    """The warp-per-pair distance kernel (32 lanes in lockstep, each a strip of columns, rows
    streaming through them): the CPU kernel's distances to the bit, for y filling a pass or
    not, several passes, empty x and y."""
    _check_symbol_distances(host_jobs, tmp_path, "symbols_warp", warps, np.random.default_rng(longest_y),
                            (0, longest_x), longest_y, 5, 12, max_n)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_padded_sequences_match_cpu_bit_for_bit(host_jobs, tmp_path, dtype):
    rng = np.random.default_rng(4)
    B, rows, cols = 25, 13, 11
    costs = torch.as_tensor(rng.integers(0, 4, (B, rows, cols)) / 2, dtype=dtype)
    costs[::3] = torch.as_tensor(rng.random((len(range(0, B, 3)), rows, cols)), dtype=dtype)
    x_len = torch.as_tensor(rng.integers(0, rows, B))
    y_len = torch.as_tensor(rng.integers(0, cols, B))
    arrays = {"costs": costs.numpy(), "x_len": x_len.numpy(), "y_len": y_len.numpy()}
    for need_coopt in (False, True):
        d_cpu, p_cpu = _ext.sed_cpu(costs, x_len, y_len, need_coopt, 1e-9)
        d, p, status = _run(host_jobs, tmp_path, "padded", dtype, need_coopt, 1e-9, 7, arrays, B, rows, cols,
                            rows - 1, cols - 1)
        assert (status == OK).all()
        assert torch.equal(d, d_cpu)
        if need_coopt:
            # the CPU returns P in the costs' layout; entries outside a pair's block stay 0
            assert torch.equal(p, p_cpu)


def test_counts_beyond_doubles_take_the_exact_counts(host_jobs, tmp_path):
    """Zero costs tie every alignment: the counts of a 700 x 700 pair pass 2^1024, so its job
    reports the overflow and the exact counts (with exponents) solve it again; the short pairs
    of the same launch keep the double counts."""
    S = 3
    table = torch.zeros(S, S, dtype=torch.float64)
    xl = np.zeros(700 + 3, dtype=np.int64)
    xp = np.array([0, 700, 703], dtype=np.int64)
    px = torch.tensor([0, 1, 1])
    py = torch.tensor([0, 1, 0])
    args = (table, torch.as_tensor(xl), torch.as_tensor(xp), torch.as_tensor(xl), torch.as_tensor(xp), px, py)
    d_cpu, p_cpu = _ext.sed_symbols_cpu(*args, True, 1e-9)
    arrays = {"table": table.numpy(), "x_labels": xl, "x_ptr": xp, "y_labels": xl, "y_ptr": xp,
              "pair_x": px.numpy(), "pair_y": py.numpy()}
    d, p, status = _run(host_jobs, tmp_path, "symbols", table.dtype, True, 1e-9, 2, arrays, 3, 701, 701, 700, 700,
                        table_shape=(S, S))
    assert (status == OK).all()
    assert torch.equal(d, d_cpu)
    assert torch.equal(p, p_cpu)
    # each replacement on the diagonal is in the same share of the (equally likely) alignments
    assert p[0, 0, 0] > 0 and p[0, 0, 0] == p[0, 699, 699]


def test_bad_costs_get_their_status(host_jobs, tmp_path):
    """What the glue turns into the CPU kernels' ValueErrors, per pair: NaN or inf anywhere in
    a pair's block (its unused corner too), and costs beyond the overflow rule."""
    costs = torch.ones(4, 3, 3, dtype=torch.float64)
    costs[1, 0, 1] = float("nan")
    costs[2, 2, 2] = float("inf")  # the corner [m, n] of a (2, 2) pair
    costs[3] = 1e308
    x_len = torch.full((4,), 2)
    y_len = torch.full((4,), 2)
    arrays = {"costs": costs.numpy(), "x_len": x_len.numpy(), "y_len": y_len.numpy()}
    for need_coopt in (False, True):
        _, _, status = _run(host_jobs, tmp_path, "padded", torch.float64, need_coopt, 1e-9, 3, arrays, 4, 3, 3, 2, 2)
        assert status.tolist() == [OK, NOT_FINITE, NOT_FINITE, TOO_LARGE]
        for b, message in ((1, "NaN or inf"), (2, "NaN or inf"), (3, "too large")):  # the CPU's verdicts
            with pytest.raises(ValueError, match=message):
                _ext.sed_cpu(costs[b:b + 1], x_len[:1], y_len[:1], need_coopt, 1e-9)


def _trees(rng, count, nodes, symbols):
    """Random trees as the kernels take them: subtree sizes and labels in preorder, concatenated."""
    sizes, labels, ptr = [], [], [0]
    for _ in range(count):
        lab, children = random_tree(int(rng.integers(nodes[0], nodes[1] + 1)), range(symbols), rng)
        size = [1] * len(lab)
        for k in reversed(range(len(lab))):
            size[k] += sum(size[c] for c in children[k])
        sizes += size
        labels += lab
        ptr.append(len(sizes))
    return (torch.tensor(labels, dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64),
            torch.tensor(ptr, dtype=torch.int64))


_FLAT_NAMES = tuple(f"{side}_{name}" for side in "xy" for name in (
    "pre", "left", "node_ptr", "keys", "key_ptr", "path_index", "path_begin", "path_nodes")) + ("x_entry", "y_entry")


def _flat_trees(x_sizes, x_ptr, y_sizes, y_ptr, px, py):
    return {name: t.numpy() for name, t in zip(_FLAT_NAMES, _C._flat_tree_pairs(x_sizes, x_ptr, y_sizes, y_ptr,
                                                                                  px, py))}


def _padded_extents(xp, yp, px, py):
    """P's rows and columns for the pairs (px, py) of trees at offsets xp and yp."""
    return int((xp[1:] - xp[:-1])[px].max()) + 1, int((yp[1:] - yp[:-1])[py].max()) + 1


def _symbol_tree_arrays(flat, table, xl, xp, yl, yp):
    """The host jobs' inputs for symbol-table tree pairs."""
    return dict(flat, table=table.numpy(), x_labels=xl.numpy(), x_ptr=xp.numpy(), y_labels=yl.numpy(),
                y_ptr=yp.numpy())


@pytest.mark.parametrize("need_coopt", [False, True])
@pytest.mark.parametrize("threads", [1, 5, 64])
@pytest.mark.parametrize("y_symbols", [5, 2])  # a square table and a rectangular one
def test_symbol_trees_match_cpu_bit_for_bit(host_jobs, tmp_path, need_coopt, threads, y_symbols):
    """Every keyroot pair's full forest table per thread (the GPU's job) against the CPU kernel
    (which skips cells no later table reads, uses closed forms for leaf keyroots, counts only
    the tables some co-optimal mapping passes and runs pairs in AVX2 lanes): the same sums in
    the same order, so the same bits, distances and P. Paths, stars and everything between, in
    both orientations (the CPU picks one per pair); tables full of ties."""
    rng = np.random.default_rng(5)
    xl, xs, xp = _trees(rng, 8, (1, 16), 5)
    yl, ys, yp = _trees(rng, 6, (1, 16), y_symbols)
    px = torch.as_tensor(rng.integers(0, 8, 30))
    py = torch.as_tensor(rng.integers(0, 6, 30))
    flat = _flat_trees(xs, xp, ys, yp, px, py)
    assert set(flat["x_entry"] % 2) == {0, 1}  # both orientations occur
    rows, cols = _padded_extents(xp, yp, px, py)
    for table in _tables(rng, y_symbols):
        d_cpu, p_cpu = _ext.ted_symbols_cpu(table, xl, xs, xp, yl, ys, yp, px, py, need_coopt, 1e-9)
        arrays = _symbol_tree_arrays(flat, table, xl, xp, yl, yp)
        d, p, status = _run(host_jobs, tmp_path, "tree_symbols", table.dtype, need_coopt, 1e-9, threads, arrays,
                            len(px), rows, cols, rows - 1, cols - 1, table_shape=table.shape)
        assert (status == OK).all()
        assert torch.equal(d, d_cpu)
        if need_coopt:
            assert p_cpu.shape == (len(px), rows, cols)
            assert torch.equal(p, p_cpu)


def _with_trees(tensors, trees):
    """(labels, sizes, ptr) of _trees with more (labels, children) trees appended."""
    labels, sizes, ptr = (t.tolist() for t in tensors)
    for lab, children in trees:
        size = [1] * len(lab)
        for k in reversed(range(len(lab))):
            size[k] += sum(size[c] for c in children[k])
        labels += list(lab)
        sizes += size
        ptr.append(len(sizes))
    return tuple(torch.tensor(v, dtype=torch.int64) for v in (labels, sizes, ptr))


@pytest.mark.parametrize("y_symbols", [5, 2])
def test_tree_lane_groups_match_cpu_bit_for_bit(host_jobs, tmp_path, y_symbols):
    """The lane groups' kernel (up to 32 pairs that share x, each lane on y's wide layout,
    arrays interleaved by lane) and the per-pair kernel for the pairs it leaves out (one-node
    trees, rows of more than 2^15 cells) give the CPU's bits: full groups and partial ones,
    lanes of different widths, both orientations, paths, stars and combs, tables with ties,
    signed costs and float32."""
    from oracles import comb_tree, path_tree, star_tree

    rng = np.random.default_rng(12)
    def shaped(count, symbols):
        def labels(n):
            return list(rng.integers(0, symbols, n))
        return [path_tree(9, labels(9)), star_tree(10, labels(10)), comb_tree(count, labels(count)),
                comb_tree(11, labels(11), leaf_first=False), ([0], [[]])]
    xl, xs, xp = _with_trees(_trees(rng, 5, (1, 30), 5), shaped(13, 5))
    yl, ys, yp = _with_trees(_trees(rng, 40, (1, 30), y_symbols), shaped(260, y_symbols))  # the comb: W ~ 260^2 / 2
    x_count, y_count = len(xp) - 1, len(yp) - 1
    px = torch.as_tensor(np.repeat(np.arange(x_count), y_count))  # 45 y's a x: a group of 32, one of 13
    py = torch.as_tensor(np.tile(np.arange(y_count), x_count))
    flat = _flat_trees(xs, xp, ys, yp, px, py)
    rows, cols = _padded_extents(xp, yp, px, py)
    for table in _tables(rng, y_symbols):
        d_cpu, _ = _ext.ted_symbols_cpu(table, xl, xs, xp, yl, ys, yp, px, py, False, 1e-9)
        arrays = _symbol_tree_arrays(flat, table, xl, xp, yl, yp)
        d, _, status = _run(host_jobs, tmp_path, "tree_lanes", table.dtype, False, 1e-9, 7, arrays, len(px), rows,
                            cols, rows - 1, cols - 1, table_shape=table.shape)
        groups, in_groups, left_out, launches = np.fromfile(tmp_path / "plan", dtype=np.int64)
        # left out: pairs with a one-node tree, and the 260-node comb against the larger x's
        assert 0 < left_out < len(px) // 4 and in_groups + left_out == len(px)
        assert groups >= 2 * x_count - 2  # most x's: a full group and a partial one
        assert launches >= 3  # groups of several sizes of arrays
        assert (status == OK).all()
        assert torch.equal(d, d_cpu)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_padded_trees_match_cpu_bit_for_bit(host_jobs, tmp_path, dtype):
    rng = np.random.default_rng(6)
    _, xs, xp = _trees(rng, 7, (1, 12), 3)
    px = torch.as_tensor(rng.integers(0, 7, 20))
    py = torch.as_tensor(rng.integers(0, 7, 20))
    sizes = (xp[1:] - xp[:-1])
    rows = cols = int(sizes.max()) + 1
    costs = torch.as_tensor(rng.integers(0, 4, (20, rows, cols)) / 2, dtype=dtype)  # halves: ties
    costs[::3] = torch.as_tensor(rng.random((7, rows, cols)), dtype=dtype)
    costs[1::5] -= 0.75  # signed costs
    arrays = dict(_flat_trees(xs, xp, xs, xp, px, py), costs=costs.numpy())
    for need_coopt in (False, True):
        d_cpu, p_cpu = _ext.ted_cpu(costs, xs, xp, xs, xp, px, py, need_coopt, 1e-9)
        d, p, status = _run(host_jobs, tmp_path, "tree_padded", dtype, need_coopt, 1e-9, 6, arrays, 20, rows, cols,
                            rows - 1, cols - 1)
        assert (status == OK).all()
        assert torch.equal(d, d_cpu)
        if need_coopt:
            assert torch.equal(p, p_cpu)


def test_tree_counts_beyond_doubles_take_the_exact_counts(host_jobs, tmp_path):
    """Zero costs tie every mapping: two paths of 700 nodes have as many as two sequences of
    700 symbols, past 2^1024, so the job reports the overflow and the exact counts solve the
    pair again; the small pairs of the same launch keep the double counts."""
    S = 3
    table = torch.zeros(S, S, dtype=torch.float64)
    sizes = torch.cat([torch.arange(700, 0, -1), torch.tensor([3, 1, 1])])  # a path; a root with two leaves
    ptr = torch.tensor([0, 700, 703])
    labels = torch.zeros(703, dtype=torch.int64)
    px = torch.tensor([0, 1, 1])
    py = torch.tensor([0, 1, 0])
    d_cpu, p_cpu = _ext.ted_symbols_cpu(table, labels, sizes, ptr, labels, sizes, ptr, px, py, True, 1e-9)
    arrays = dict(_flat_trees(sizes, ptr, sizes, ptr, px, py), table=table.numpy(), x_labels=labels.numpy(),
                  x_ptr=ptr.numpy(), y_labels=labels.numpy(), y_ptr=ptr.numpy())
    d, p, status = _run(host_jobs, tmp_path, "tree_symbols", table.dtype, True, 1e-9, 2, arrays, 3, 701, 701, 700,
                        700, table_shape=(S, S))
    assert (status == OK).all()
    assert torch.equal(d, d_cpu)
    assert torch.equal(p, p_cpu)
    # the path's root is replaced by the other root in the same share of mappings as its leaf by the leaf
    assert p[0, 0, 0] > 0 and p[0, 0, 0] == p[0, 699, 699]


def test_bad_tree_costs_get_their_status(host_jobs, tmp_path):
    """NaN or inf in a pair's block (the unused corner too) and costs beyond the overflow rule,
    per pair, as the CPU kernel's errors say."""
    sizes = torch.tensor([2, 1], dtype=torch.int64)  # one tree: a root with one child
    ptr = torch.tensor([0, 2], dtype=torch.int64)
    pair = torch.zeros(4, dtype=torch.int64)
    costs = torch.ones(4, 3, 3, dtype=torch.float64)
    costs[1, 1, 0] = float("nan")
    costs[2, 2, 2] = float("inf")
    costs[3] = 1e308
    arrays = dict(_flat_trees(sizes, ptr, sizes, ptr, pair, pair), costs=costs.numpy())
    for need_coopt in (False, True):
        _, _, status = _run(host_jobs, tmp_path, "tree_padded", torch.float64, need_coopt, 1e-9, 2, arrays, 4, 3, 3,
                            2, 2)
        assert status.tolist() == [OK, NOT_FINITE, NOT_FINITE, TOO_LARGE]
        for b, message in ((1, "NaN or inf"), (2, "NaN or inf"), (3, "too large")):
            with pytest.raises(ValueError, match=message):
                _ext.ted_cpu(costs[b:b + 1], sizes, ptr, sizes, ptr, pair[:1], pair[:1], need_coopt, 1e-9)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("source", sorted(
    os.path.relpath(os.path.join(d, f), REPO) for d, _, fs in os.walk(os.path.join(REPO, "csrc", "cuda"))
    for f in fs if f.endswith(".cu")))
def test_kernels_compile_as_device_code(tmp_path, source):
    """The CUDA kernels include no torch header, so nvcc alone compiles them (for an H100),
    with setup.py's flags."""
    proc = subprocess.run(["nvcc", "-std=c++20", "-O3", "--fmad=false", "-arch=sm_90", f"-I{REPO}/csrc", "-c",
                           os.path.join(REPO, source), "-o", str(tmp_path / "kernels.o")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


SOFT_RANGE = 5


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_soft_sequences_match_cpu_bit_for_bit(host_jobs, tmp_path, dtype):
    """The soft passes per thread (common/sequence_soft.h with the node potentials, weights as
    doubles, the wide weights where they leave their range: long pairs at a low temperature)
    against the CPU kernel: the same bits on the host (the GPU's exp and log round otherwise)."""
    rng = np.random.default_rng(30)
    B, rows, cols = 12, 13, 11
    costs = torch.as_tensor(rng.random((B, rows, cols)) * 3 - 0.5, dtype=dtype)
    x_len = torch.as_tensor(rng.integers(0, rows, B))
    y_len = torch.as_tensor(rng.integers(0, cols, B))
    arrays = {"costs": costs.numpy(), "x_len": x_len.numpy(), "y_len": y_len.numpy()}
    for temperature in (1.0, 0.05, 1e-3):
        for need_grad in (False, True):
            d_cpu, p_cpu = _ext.sed_soft_cpu(costs, x_len, y_len, temperature, need_grad)
            d, p, status = _run(host_jobs, tmp_path, "seq_soft", dtype, need_grad, temperature, 5, arrays, B, rows,
                                cols, rows - 1, cols - 1)
            assert (status == OK).all()
            assert torch.equal(d, d_cpu)
            if need_grad:
                assert torch.equal(p, p_cpu)
    # 300 + 300 symbols start with wide weights
    long = torch.as_tensor(rng.random((1, 301, 301)), dtype=torch.float64)
    n = torch.tensor([300])
    d_cpu, p_cpu = _ext.sed_soft_cpu(long, n, n, 0.01, True)
    d, p, status = _run(host_jobs, tmp_path, "seq_soft", torch.float64, True, 0.01, 1,
                        {"costs": long.numpy(), "x_len": n.numpy(), "y_len": n.numpy()}, 1, 301, 301, 300, 300)
    assert (status == OK).all() and torch.equal(d, d_cpu) and torch.equal(p, p_cpu)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_soft_trees_match_cpu_bit_for_bit(host_jobs, tmp_path, dtype):
    rng = np.random.default_rng(31)
    _, xs, xp = _trees(rng, 7, (1, 14), 3)
    px = torch.as_tensor(rng.integers(0, 7, 16))
    py = torch.as_tensor(rng.integers(0, 7, 16))
    rows = cols = int((xp[1:] - xp[:-1]).max()) + 1
    costs = torch.as_tensor(rng.random((16, rows, cols)) * 2 - 0.25, dtype=dtype)
    arrays = dict(_flat_trees(xs, xp, xs, xp, px, py), costs=costs.numpy())
    for temperature in (1.0, 0.02):
        for need_grad in (False, True):
            d_cpu, p_cpu = _ext.ted_soft_cpu(costs, xs, xp, xs, xp, px, py, temperature, need_grad)
            d, p, status = _run(host_jobs, tmp_path, "tree_soft", dtype, need_grad, temperature, 4, arrays, 16, rows,
                                cols, rows - 1, cols - 1)
            assert (status == OK).all()
            assert torch.equal(d, d_cpu)
            if need_grad:
                assert torch.equal(p, p_cpu)


def test_soft_statuses_are_the_cpu_errors(host_jobs, tmp_path):
    """NaN, the overflow rule and costs too large for the temperature, per pair."""
    costs = torch.ones(4, 3, 3, dtype=torch.float64)
    costs[1, 0, 1] = float("nan")
    costs[2] = 1e308
    costs[3] = 1e10
    x_len = torch.full((4,), 2)
    y_len = torch.full((4,), 2)
    arrays = {"costs": costs.numpy(), "x_len": x_len.numpy(), "y_len": y_len.numpy()}
    temperature = 1e-10
    _, _, status = _run(host_jobs, tmp_path, "seq_soft", torch.float64, True, temperature, 2, arrays, 4, 3, 3, 2, 2)
    assert status.tolist() == [OK, NOT_FINITE, TOO_LARGE, SOFT_RANGE]
    for b, message in ((1, "NaN or inf"), (2, "too large"), (3, "too large for temperature")):
        with pytest.raises(ValueError, match=message):
            _ext.sed_soft_cpu(costs[b:b + 1], x_len[:1], y_len[:1], temperature, True)
    with pytest.raises(ValueError):  # (pair 0 alone is fine at this temperature)
        _ext.sed_soft_cpu(costs[3:4], x_len[:1], y_len[:1], temperature, False)
    _ext.sed_soft_cpu(costs[:1], x_len[:1], y_len[:1], temperature, False)

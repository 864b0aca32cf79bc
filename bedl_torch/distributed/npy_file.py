"""The ``.npy`` file that :func:`~bedl_torch.distributed.pairwise_distances` writes tile by tile
(``out=``), with its record of finished tiles for ``resume``."""
from __future__ import annotations

import json
import os
from typing import List, Optional, Tuple

import numpy as np
import torch

from .group import ProcessGroup, raise_if_failed
from .problem import MatrixProblem, compute_share
from .tiles import Tile, assign_tiles, default_tile_size

__all__ = ["pairwise_to_file", "finished_tiles", "read_header"]

META_FORMAT = 1


def _tiles_dir(path: str) -> str:
    return path + ".tiles"


def _meta_path(path: str) -> str:
    return os.path.join(_tiles_dir(path), "meta.json")


def _marker_path(path: str, tile: Tile) -> str:
    return os.path.join(_tiles_dir(path), tile.name + ".done")


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    return np.dtype(torch.empty(0, dtype=dtype).numpy().dtype).newbyteorder("<")


def read_header(path: str) -> Tuple[Tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data offset)`` of a ``.npy`` file."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        return tuple(shape), fortran, dtype, f.tell()


def _describe(meta: dict) -> str:
    shape = "x".join(str(s) for s in meta["shape"])
    return f"a {shape} {meta['dtype']} matrix in tiles of {meta['tile_size']}"


def finished_tiles(path: str) -> List[str]:
    folder = _tiles_dir(path)
    if not os.path.isdir(folder):
        return []
    return sorted(f[: -len(".done")] for f in os.listdir(folder) if f.endswith(".done"))


def _start_file(path: str, meta: dict, resume: bool) -> List[str]:
    """Rank 0: the names of the tiles a previous run finished (resume), or a fresh file."""
    meta_path = _meta_path(path)
    if resume and os.path.exists(meta_path) and os.path.exists(path):
        with open(meta_path, "r", encoding="utf-8") as f:
            old = json.load(f)
        hint = "; pass resume=False (no --resume) to start over"
        for key in ("format", "shape", "dtype", "tile_size", "symmetric"):
            if old.get(key) != meta[key]:
                raise ValueError(f"cannot resume {path}: it holds {_describe(old)}, this call makes "
                                 f"{_describe(meta)} ({key} differs){hint}")
        if old.get("fingerprint") != meta["fingerprint"]:
            raise ValueError(f"cannot resume {path}: it was started with other objects, costs or "
                             f"options than this call{hint}")
        shape, fortran, dtype, _ = read_header(path)
        if list(shape) != meta["shape"] or fortran or dtype.str != meta["dtype"]:
            raise ValueError(f"cannot resume {path}: its header says {shape} {dtype.str}, its "
                             f"record {_describe(meta)}{hint}")
        return finished_tiles(path)
    # A fresh file: first forget the old record, so that a crash in between leaves none.
    folder = _tiles_dir(path)
    os.makedirs(folder, exist_ok=True)
    if os.path.exists(meta_path):
        os.remove(meta_path)
    for name in finished_tiles(path):
        os.remove(os.path.join(folder, name + ".done"))
    created = np.lib.format.open_memmap(path, mode="w+", dtype=np.dtype(meta["dtype"]),
                                        shape=tuple(meta["shape"]))
    del created  # unwritten parts of the (sparse) file read as zeros
    tmp = meta_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, meta_path)
    return []


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _write_block(fd: int, data_offset: int, ncols: int, r0: int, c0: int, block: np.ndarray) -> None:
    """Write ``block`` at rows ``r0..``, columns ``c0..`` of a C-order matrix in a file."""
    itemsize = block.dtype.itemsize
    rows, cols = block.shape
    if cols == ncols:  # whole rows: one contiguous run
        _pwrite_all(fd, block.tobytes(), data_offset + r0 * ncols * itemsize)
        return
    for i in range(rows):
        _pwrite_all(fd, block[i].tobytes(), data_offset + ((r0 + i) * ncols + c0) * itemsize)


def _recorded_tile_size(path: str) -> Optional[int]:
    """The tile size a previous run recorded for ``path``, if any (resume's default)."""
    try:
        with open(_meta_path(path), "r", encoding="utf-8") as f:
            size = json.load(f).get("tile_size")
    except (OSError, ValueError):
        return None
    return size if isinstance(size, int) and size >= 1 and os.path.exists(path) else None


def pairwise_to_file(problem: MatrixProblem, tile_size: Optional[int], grp: ProcessGroup,
                     path: str, resume: bool, progress: bool):
    """The matrix written tile by tile into the ``.npy`` file ``path`` (rank 0 creates it or
    keeps its finished tiles); returns a read-only memmap of it."""
    nx, ny = problem.shape
    np_dtype = _np_dtype(problem.dtype)
    if grp.rank == 0:
        try:
            if tile_size is None:  # a resumed run keeps its tiles, whatever the world size now
                tile_size = ((_recorded_tile_size(path) if resume else None)
                             or default_tile_size(nx, ny, grp.size))
            meta = {"format": META_FORMAT, "shape": [nx, ny], "dtype": np_dtype.str,
                    "tile_size": tile_size, "symmetric": problem.symmetric,
                    "fingerprint": problem.fingerprint()}
            status = ("ok", _start_file(path, meta, resume), tile_size)
        except (ValueError, OSError) as error:
            status = ("error", f"{type(error).__name__}: {error}", error)
        # the others open the file only after this broadcast, i.e. after rank 0 made it
        message = grp.broadcast_object(status[:3] if status[0] == "ok" else status[:2], src=0)
        if status[0] == "error":
            raise status[2]
    else:
        message = grp.broadcast_object(None, src=0)
        if message[0] == "error":
            raise ValueError(f"rank 0 could not start {path}: {message[1]}")
    tiles = problem.tiles(message[2])
    finished = set(message[1])
    todo = [t for t in tiles if t.name not in finished]
    shares = assign_tiles(todo, grp.size)
    _, _, _, data_offset = read_header(path)
    fd = os.open(path, os.O_RDWR)
    try:
        def write_tile(tile: Tile, values: torch.Tensor) -> None:
            block = values.numpy().astype(np_dtype, copy=False)
            _write_block(fd, data_offset, ny, tile.r0, tile.c0, block)
            if tile.mirrored:
                _write_block(fd, data_offset, ny, tile.c0, tile.r0, np.ascontiguousarray(block.T))
            os.fdatasync(fd)  # the data is on disk before its marker says so
            with open(_marker_path(path, tile), "wb"):
                pass

        error = compute_share(problem, shares[grp.rank], grp, progress, "pairwise", write_tile)
    finally:
        os.close(fd)
    raise_if_failed(grp, error)
    return np.load(path, mmap_mode="r")


"""The process group of :mod:`bedl_torch.distributed` (one process where none is initialised),
its failure protocol and the progress bar."""
from __future__ import annotations

import sys
from typing import List, Optional

import torch
import torch.distributed as dist

__all__ = ["ProcessGroup", "raise_if_failed", "Progress"]


class ProcessGroup:
    """Rank, size and collectives of a process group; one process where none is initialised."""

    def __init__(self, group):
        if dist.is_available() and dist.is_initialized():
            self.group = group
            self.rank = dist.get_rank(group)
            self.size = dist.get_world_size(group)
            if self.rank < 0:
                raise ValueError("this process is not a member of the given process group")
            backend = dist.get_backend(group)
            self.device = (torch.device("cuda", torch.cuda.current_device())
                           if backend == "nccl" else torch.device("cpu"))
        else:
            if group is not None:
                raise ValueError("group given, but torch.distributed is not initialised")
            self.group, self.rank, self.size, self.device = None, 0, 1, torch.device("cpu")

    def global_rank(self, r: int) -> int:
        return r if self.group is None else dist.get_global_rank(self.group, r)

    def broadcast_object(self, obj, src: int = 0):
        if self.size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=self.global_rank(src), group=self.group,
                                   device=self.device if self.device.type == "cuda" else None)
        return box[0]

    def broadcast(self, tensor: torch.Tensor, src: int) -> torch.Tensor:
        if self.size > 1:
            dist.broadcast(tensor, src=self.global_rank(src), group=self.group)
        return tensor

    def failed_ranks(self, failed: bool) -> List[int]:
        """All ranks learn which ranks failed (also a barrier: every rank has finished)."""
        flags = torch.zeros(self.size, dtype=torch.int32, device=self.device)
        flags[self.rank] = int(failed)
        if self.size > 1:
            dist.all_reduce(flags, group=self.group)
        return [r for r, f in enumerate(flags.tolist()) if f]


def raise_if_failed(group: ProcessGroup, error: Optional[BaseException]) -> None:
    failed = group.failed_ranks(error is not None)
    if error is not None:
        raise error
    if failed:
        raise RuntimeError(f"distance tiles failed on rank(s) {failed}; see their error messages")


class Progress:
    """A tqdm bar (over DP cells, or ``unit``) on rank 0 when asked for and tqdm is installed;
    else silent."""

    def __init__(self, enabled: bool, total: int, desc: str, unit: str = "cell"):
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr,
                            dynamic_ncols=True)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


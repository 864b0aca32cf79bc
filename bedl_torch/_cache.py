"""``functools.lru_cache`` for the library's small caches, bypassed while ``torch.compile``
traces: Dynamo skips a cache wrapper anyway and warns about it in every compiled user function
that reaches one; traced, the wrapped function gives the same values.

Layer: torch and the standard library only.
"""
from __future__ import annotations

import functools

import torch


def lru_cache_outside_compile(maxsize: int):
    """``functools.lru_cache(maxsize)``, except that calls while compiling run the function
    itself."""
    def wrap(fn):
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args):
            return fn(*args) if torch.compiler.is_compiling() else cached(*args)

        return call
    return wrap

"""Every name a package lists in __all__ resolves (lazy exports included)."""
import importlib

import pytest


@pytest.mark.parametrize("module", ["bedl_torch", "bedl_torch.costs", "bedl_torch.learning", "bedl_torch.evaluation",
                                    "bedl_torch.alignments", "bedl_torch.ops", "bedl_torch.pretrained",
                                    "bedl_torch.search"])
def test_all_names_resolve(module):
    mod = importlib.import_module(module)
    missing = [name for name in getattr(mod, "__all__", []) if not hasattr(mod, name)]
    assert not missing, f"{module}.__all__ lists names it does not have: {missing}"

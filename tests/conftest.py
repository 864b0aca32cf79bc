import os
import pathlib

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("BEDL_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def shared_data():
    """Path of ../shared/data; tests that need it skip where it is absent."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not available")
    return path


@pytest.fixture(autouse=True)
def _deterministic_seed():
    torch.manual_seed(0)
    yield

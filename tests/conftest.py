import os

import pytest
import torch

# The machines have 2 cores; keep each test process to them and deterministic.
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield

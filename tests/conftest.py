import os

import pytest
import torch

# The machines have 2 cores; keep each test process to them and deterministic.
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """One torch thread for tests of tiny tensors: on a shared, loaded 2-core machine two
    threads oversubscribe it and OpenMP barriers stall. Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` run only where a CUDA device is present (``make gpu-check``)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none here); make gpu-check runs it")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)

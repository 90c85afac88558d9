"""allocate_for_timing: after the precise-memory setting, tensors are reused from the heap
(no page faults per allocation), as in a process started without it."""

import os
import subprocess
import sys

import pytest

from tokengeo.bench.measure import MMAP_ENV, allocate_for_timing

CHILD = """
import resource, sys, torch
from tokengeo.bench.measure import allocate_for_timing

def faults():  # minor page faults of 50 allocations of a 4 MiB tensor, each written
    for _ in range(20):  # glibc settles within about 8
        torch.ones(2**20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        torch.ones(2**20)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

precise = faults()
switched = allocate_for_timing()
print(precise, switched, faults())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_timing_allocator_stops_the_page_faults_of_each_allocation():
    env = {**os.environ, MMAP_ENV: "65536"}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    precise, switched, steady = int(out[0]), out[1] == "True", int(out[2])
    assert switched
    assert precise >= 50 * 1024 * 0.9  # every 4 MiB tensor faulted in, page by page
    assert steady < 50 * 1024 * 0.02  # reused from the heap


def test_timing_allocator_does_nothing_without_the_precise_setting(monkeypatch):
    monkeypatch.delenv(MMAP_ENV, raising=False)
    assert allocate_for_timing() is False

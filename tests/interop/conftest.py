from __future__ import annotations

import pytest

from interop.cases import CASE_NAMES, all_cases


@pytest.fixture(scope="session")
def llama_folder(tmp_path_factory):
    from helpers.tiny_llama import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(params=CASE_NAMES)
def case(request, llama_folder):
    return {c.name: c for c in all_cases(llama_folder)}[request.param]

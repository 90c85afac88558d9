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


@pytest.fixture(scope="session")
def require_source():
    """``require_source(source)`` skips the test, naming the install command, when the data
    source (:mod:`tokengeo.data.sources`) is not installed here."""
    def require(source) -> None:
        if not source.available():
            pytest.skip(f"{source.name} is not installed here; install it with: "
                        f"{source.install}")

    return require


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory):
    """Token, tokenizer and encoding caches go to a temporary folder (one per test module),
    not the user's cache. Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("private_cache")``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKENGEO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture
def fake_suite(tmp_path, monkeypatch):
    """``fake_suite(cells, summarise, toml, **kinds) -> conf folder``: a fabricated
    :class:`~tokengeo.experiments.suite.Suite` named ``fake`` that ``reproduce`` runs as its
    only suite (``cells(settings, ctx)``, ``summarise(settings, results, ctx)``; its settings
    schema ``kinds``, each setting's :class:`~tokengeo.experiments.settings.Setting` kind),
    with its settings ``toml`` written to ``conf/fake.toml``; pass the folder
    as ``ReproduceConfig(config_dir=...)``. The suite is the module ``tokengeo_fake_suite``'s
    ``SUITE``, in ``reproduce.SUITES``."""
    import sys
    import types

    from tokengeo.experiments import reproduce as rp
    from tokengeo.experiments.settings import Setting
    from tokengeo.experiments.suite import Suite

    def install(cells, summarise, toml: str, **kinds: str):
        module = types.ModuleType("tokengeo_fake_suite")
        module.SUITE = Suite("fake", "Fake suite", "Fake et al.",
                             {k: Setting(kind) for k, kind in kinds.items()}, cells, summarise)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setattr(rp, "SUITES", {"fake": module.__name__})
        conf = tmp_path / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "fake.toml").write_text(toml)
        return conf

    return install

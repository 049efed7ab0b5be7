"""The jobs' CPU threads: --threads, OMP_NUM_THREADS, or the cores idle when the job starts."""

import torch

from tasks.training.process import choose_threads, idle_threads
from tasks.training.settings import TrainingSettings, resolve_training


def test_idle_threads_leaves_busy_cores_alone():
    assert idle_threads(2, 0.0) == 2
    assert idle_threads(2, 0.3) == 2  # a little background noise is not a busy core
    assert idle_threads(2, 0.9) == 1
    assert idle_threads(2, 2.0) == 1  # never fewer than one
    assert idle_threads(8, 3.2) == 5


def test_an_explicit_number_wins_and_nothing_is_sampled():
    def sample():
        raise AssertionError("the load must not be sampled when --threads is given")

    assert choose_threads(3, env={"OMP_NUM_THREADS": "1"}, sample=sample) == (3, "--threads 3")


def test_omp_num_threads_keeps_torchs_number():
    def sample():
        raise AssertionError("OMP_NUM_THREADS decides; no sampling")

    threads, why = choose_threads(0, env={"OMP_NUM_THREADS": "1"}, sample=sample)
    assert threads == torch.get_num_threads()
    assert why == "OMP_NUM_THREADS=1"


def test_the_default_backs_off_from_a_busy_core():
    most = torch.get_num_threads()
    threads, why = choose_threads(0, env={}, sample=lambda: 1.0)
    assert threads == max(1, most - 1)
    if most > 1:  # says what it measured, and proposes no setting it measured slower
        assert why.startswith(f"1.0 of {most} cores busy") and "--threads" not in why
    threads, why = choose_threads(None, env={}, sample=lambda: 0.0)
    assert threads == most and "0.0 busy" in why


def test_resolving_the_threads_sets_torch():
    before = torch.get_num_threads()
    try:
        assert resolve_training(TrainingSettings(threads=1, precision="fp32")).threads == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)

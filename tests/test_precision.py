"""--precision: `auto` picks bf16 exactly where the device multiplies bfloat16 natively (capability mocked),
and the choice reaches the loop and the run's recorded settings."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from tasks.training.settings import RunSettings, SettingsParser, TrainingSettings, resolve_precision, resolve_training


@dataclass(frozen=True)
class Training(RunSettings):
    training: TrainingSettings = TrainingSettings()


def parse(*argv: str) -> TrainingSettings:
    return SettingsParser("test", None, Training()).parse(list(argv)).training


@pytest.fixture(autouse=True)
def keep_threads():
    """resolve_training() sets PyTorch's threads (--threads); the tests after these keep theirs."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def cpu_bf16(monkeypatch):
    """Pretend the CPU has (True) or lacks (False) native bfloat16."""
    def pretend(native: bool) -> None:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native, raising=False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: native, raising=False)
    return pretend


def test_auto_picks_fp32_on_a_cpu_without_native_bf16(cpu_bf16):
    cpu_bf16(False)
    chosen, why = resolve_precision("auto", "cpu")
    assert chosen == "fp32" and "no native bfloat16" in why


def test_auto_picks_bf16_on_a_cpu_with_native_bf16(cpu_bf16):
    cpu_bf16(True)
    chosen, why = resolve_precision("auto", "cpu")
    assert chosen == "bf16" and "natively" in why


@pytest.mark.parametrize("native", [False, True])
def test_an_explicit_precision_is_taken_as_given(cpu_bf16, native):
    cpu_bf16(native)
    assert resolve_precision("fp32", "cpu")[0] == "fp32"
    assert resolve_precision("bf16", "cpu")[0] == "bf16"


def test_an_unknown_precision_names_the_flag_and_the_choices():
    with pytest.raises(ValueError, match=r"--precision must be one of \('auto', 'fp32', 'bf16', 'fp16'\)"):
        resolve_precision("fp8", "cpu")


def test_resolve_decides_auto_and_says_so_without_changing_the_parsed_settings(cpu_bf16, capsys):
    cpu_bf16(True)
    parsed = parse("--precision", "auto", "--threads", "1")
    resolved = resolve_training(parsed)
    assert resolved.precision == "bf16" and parsed.precision == "auto"  # a new value; config.json gets it
    assert "precision: bf16" in capsys.readouterr().err
    cpu_bf16(False)
    assert resolve_training(parse("--threads", "1")).precision == "fp32"


def test_the_default_is_auto(cpu_bf16):
    cpu_bf16(True)
    assert parse().precision == "auto"
    assert resolve_training(parse("--threads", "1")).precision == "bf16"


@pytest.mark.parametrize("native", [False, True])
def test_auto_on_a_gpu_picks_bf16_where_native_else_fp16(monkeypatch, native):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: native)
    chosen, why = resolve_precision("auto", "cuda")
    assert chosen == ("bf16" if native else "fp16")
    assert ("multiplies bfloat16 natively" if native else "dynamic loss scale") in why

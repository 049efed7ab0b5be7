"""--precision: `auto` picks bf16 exactly where the device multiplies bfloat16 natively (capability mocked),
`--bf16` stays an alias, and the choice reaches the loop and the run's recorded settings."""

from __future__ import annotations

import argparse

import pytest
import torch

from tasks.training import precision
from tasks.training.config import DEFAULT_PRECISION, add_train_arguments, train_config_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def cpu_bf16(monkeypatch):
    """Pretend the CPU has (True) or lacks (False) native bfloat16."""
    def pretend(native: bool) -> None:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native, raising=False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: native, raising=False)
    return pretend


def test_auto_picks_fp32_on_a_cpu_without_native_bf16(cpu_bf16):
    cpu_bf16(False)
    chosen, why = precision.resolve_precision("auto", "cpu")
    assert chosen == "fp32" and "no native bfloat16" in why


def test_auto_picks_bf16_on_a_cpu_with_native_bf16(cpu_bf16):
    cpu_bf16(True)
    chosen, why = precision.resolve_precision("auto", "cpu")
    assert chosen == "bf16" and "natively" in why


@pytest.mark.parametrize("native", [False, True])
def test_an_explicit_precision_is_taken_as_given(cpu_bf16, native):
    cpu_bf16(native)
    assert precision.resolve_precision("fp32", "cpu")[0] == "fp32"
    assert precision.resolve_precision("bf16", "cpu")[0] == "bf16"


def test_an_unknown_precision_names_the_flag_and_the_choices():
    with pytest.raises(ValueError, match=r"--precision must be one of \('auto', 'fp32', 'bf16'\)"):
        precision.resolve_precision("fp16", "cpu")


def test_the_flags_reach_the_loop_and_the_recorded_settings(cpu_bf16, capsys):
    cpu_bf16(True)
    args = parse("--precision", "auto")
    config = train_config_from_args(args, freeze_encoder=False)
    assert config.bf16 and args.precision == "bf16"  # config.json records what ran, not "auto"
    assert "precision: bf16" in capsys.readouterr().err
    cpu_bf16(False)
    args = parse("--precision", "auto")
    assert not train_config_from_args(args, freeze_encoder=False).bf16 and args.precision == "fp32"


def test_bf16_is_an_alias_and_contradictions_are_refused(cpu_bf16):
    cpu_bf16(False)
    assert train_config_from_args(parse("--bf16"), freeze_encoder=False).bf16
    assert train_config_from_args(parse("--bf16", "--precision", "bf16"), freeze_encoder=False).bf16
    with pytest.raises(SystemExit, match="--bf16 and --precision fp32 contradict"):
        train_config_from_args(parse("--bf16", "--precision", "fp32"), freeze_encoder=False)


def test_the_default_is_the_documented_one(cpu_bf16):
    cpu_bf16(True)
    config = train_config_from_args(parse(), freeze_encoder=False)
    assert config.bf16 == (DEFAULT_PRECISION != "fp32")

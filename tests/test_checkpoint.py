"""Checkpoints: what `transformers` saves, we load; what we save, `transformers` loads; bad files fail loudly.

Parity tests build a model with `transformers`, perturb every parameter (so a swapped bias or a
LayerNorm left at its init of 1/0 shows), save it, load it with ours and compare every output: hidden
states, pooler, masked-LM and next-sentence logits. Tolerance: atol 1e-5 / rtol 1e-5 for float32
(the same weights, but the two implementations sum in different orders), atol 5e-5 / rtol 1e-4 at
bert-base depth; the real checkpoint is compared to 1e-5 as well.

`transformers` 5 can no longer write pytorch_model.bin, so .bin checkpoints are written the way
transformers 4 wrote them with safe_serialization=False: torch.save of the whole state dict, tied
decoder keys included.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import save_file

from minbert.loading.checkpoint import (CheckpointError, LoadReport, find_weights_file, normalise_keys, read_weights,
                                save_model)
from minbert.config import BertConfig
from minbert.heads import BertForPreTraining
from minbert.loading.hub import ModelNotFoundError
from minbert.model import BertModel

TOL = dict(atol=1e-5, rtol=1e-5)
BASE_TOL = dict(atol=5e-5, rtol=1e-4)  # 12 layers of differently ordered float32 sums (logits ~ 5)
HF_TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
               vocab_size=99, max_position_embeddings=64, type_vocab_size=2)
HF_CLASSES = {BertModel: transformers.BertModel, BertForPreTraining: transformers.BertForPreTraining}


# ----- helpers -------------------------------------------------------------------------------------


def load(directory: Path, cls: type = BertModel):
    """(model, LoadReport): what every loader calls, the model class's from_pretrained."""
    return cls.from_pretrained(directory, return_report=True)


def perturb_(model: torch.nn.Module) -> torch.nn.Module:
    """Move every parameter off its initial value (LayerNorm 1/0, zero biases would hide swaps)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def hf_model(cls, **config) -> torch.nn.Module:
    return perturb_(cls(transformers.BertConfig(**{**HF_TINY, **config})))


def save_hf(model: torch.nn.Module, directory: Path, fmt: str) -> Path:
    """safetensors: transformers' own save_pretrained; bin: the transformers 4 .bin layout."""
    if fmt == "safetensors":
        model.save_pretrained(directory)
    else:
        model.config.save_pretrained(directory)
        torch.save(model.state_dict(), directory / "pytorch_model.bin")
    return directory


def write_checkpoint(directory: Path, state: dict, config: dict | None = None, fmt: str = "bin") -> Path:
    """A hand-made checkpoint: config.json (default: the tiny one) and the given state dict."""
    directory.mkdir(parents=True, exist_ok=True)
    values = {"model_type": "bert", **HF_TINY, **(config or {})}
    (directory / "config.json").write_text(json.dumps(values))
    state = {k: v.detach().clone().contiguous() for k, v in state.items()}
    if fmt == "bin":
        torch.save(state, directory / "pytorch_model.bin")
    else:
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory


def outputs(model: torch.nn.Module, batch) -> dict[str, torch.Tensor]:
    """Every output we compare, from either implementation (both return .bert / base outputs)."""
    input_ids, attention_mask, token_type_ids = batch
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    if hasattr(out, "prediction_logits"):
        return {"mlm": out.prediction_logits, "nsp": out.seq_relationship_logits}
    return {"hidden": out.last_hidden_state, "pooler": out.pooler_output}


def encoder_outputs(model: torch.nn.Module, batch) -> dict[str, torch.Tensor]:
    return outputs(model.bert if hasattr(model, "bert") else model, batch)


def assert_same(ours: dict, theirs: dict, tol: dict = TOL) -> None:
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], **tol, msg=lambda m: f"{name}: {m}")


def assert_same_model(ours, theirs, batch, tol: dict = TOL) -> None:
    assert_same(outputs(ours, batch), outputs(theirs, batch), tol)
    assert_same(encoder_outputs(ours, batch), encoder_outputs(theirs, batch), tol)


def legacy(state: dict, rename_layernorm: bool = True) -> dict:
    """The TF-era layout: LayerNorm.gamma / beta and a stale embeddings.position_ids buffer."""
    out = {}
    for k, v in state.items():
        if rename_layernorm and "LayerNorm" in k:
            k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        out[k] = v
    prefix = "bert." if any(k.startswith("bert.") for k in state) else ""
    out[prefix + "embeddings.position_ids"] = torch.arange(HF_TINY["max_position_embeddings"])[None]
    return out


@pytest.fixture
def batch():
    """Three sequences of length 11, two of them padded; a sentence pair's segment ids."""
    input_ids = torch.randint(1, HF_TINY["vocab_size"], (3, 11))
    attention_mask = torch.ones(3, 11, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 4:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(3, 11, dtype=torch.long)
    token_type_ids[0, 6:] = 1
    return input_ids, attention_mask, token_type_ids


@pytest.fixture(scope="module")
def hf_pretraining():
    torch.manual_seed(1)
    return hf_model(transformers.BertForPreTraining)


@pytest.fixture(scope="module")
def hf_encoder():
    torch.manual_seed(2)
    return hf_model(transformers.BertModel)


@pytest.fixture
def good_state(hf_pretraining) -> dict:
    """A clean BertForPreTraining state dict (transformers' names, no tied decoder keys)."""
    return {k: v.clone() for k, v in hf_pretraining.state_dict().items() if "decoder" not in k}


# ----- what transformers saves, we load ---------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("ours_cls", [BertModel, BertForPreTraining])
def test_loads_what_transformers_saves(tmp_path, batch, fmt, ours_cls, hf_pretraining, hf_encoder):
    theirs = hf_pretraining if ours_cls is BertForPreTraining else hf_encoder
    model, report = load(save_hf(theirs, tmp_path, fmt), ours_cls)
    assert isinstance(model, ours_cls) and not model.training
    assert report.initialised == [] and report.ignored == []
    assert_same_model(model, theirs, batch)
    if fmt == "bin" and ours_cls is BertForPreTraining:  # transformers 4's .bin carries the tied decoder
        assert any("decoder.weight" in line and "tied" in line for line in report.fixups), report
        assert any("decoder.bias" in line for line in report.fixups), report
    if fmt == "safetensors":
        assert report.fixups == []


def test_bert_model_from_pretraining_checkpoint_ignores_heads(tmp_path, batch, hf_pretraining):
    model, report = load(save_hf(hf_pretraining, tmp_path, "safetensors"), BertModel)
    assert report.initialised == []
    assert report.ignored and all(k.startswith("cls.") for k in report.ignored)
    assert "cls.seq_relationship.weight" in report.ignored
    assert any("stripped the 'bert.' prefix" in line for line in report.fixups)
    assert_same(outputs(model, batch), encoder_outputs(hf_pretraining, batch))


def test_encoder_only_checkpoint_into_pretraining_initialises_heads_and_reports(tmp_path, batch, hf_encoder):
    with pytest.warns(UserWarning, match="freshly initialised"):
        model, report = load(save_hf(hf_encoder, tmp_path, "safetensors"), BertForPreTraining)
    assert report.initialised == sorted(k for k in model.state_dict() if k.startswith("cls."))
    assert not report.exact
    assert any("added the 'bert.' prefix" in line for line in report.fixups)
    text = str(report)
    assert "freshly initialised" in text and "cls.predictions.bias" in text
    assert_same(encoder_outputs(model, batch), outputs(hf_encoder, batch))
    head = model.cls.predictions.transform.LayerNorm
    assert torch.equal(head.weight, torch.ones_like(head.weight))  # BERT's init, not garbage


def test_checkpoint_without_pooler_loads_with_fresh_pooler(tmp_path, batch, hf_encoder):
    """BertForMaskedLM-style checkpoints have no pooler: the encoder loads, the pooler is reported."""
    state = {k: v for k, v in hf_encoder.state_dict().items() if not k.startswith("pooler.")}
    with pytest.warns(UserWarning):
        model, report = load(write_checkpoint(tmp_path, state), BertModel)
    assert report.initialised == ["pooler.dense.bias", "pooler.dense.weight"]
    torch.testing.assert_close(outputs(model, batch)["hidden"], outputs(hf_encoder, batch)["hidden"], **TOL)


TASK_MODELS = ["BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering",
               "BertForMultipleChoice", "BertForMaskedLM", "BertForNextSentencePrediction",
               "BertForPreTraining"]


@pytest.mark.parametrize("name", TASK_MODELS)
def test_a_task_models_folder_gives_its_encoder_with_the_heads_reported_as_automodel_does(name, tmp_path,
                                                                                          batch):
    torch.manual_seed(3)
    hf_model(getattr(transformers, name), num_labels=3).save_pretrained(tmp_path)
    heads = sorted(k for k in read_weights(tmp_path / "model.safetensors") if not k.startswith("bert."))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a masked-LM model has no pooler: fresh here and in transformers
        model, report = load(tmp_path, BertModel)
        theirs = transformers.AutoModel.from_pretrained(tmp_path).eval()
    assert type(theirs) is transformers.BertModel
    assert report.ignored == heads and heads
    assert report.initialised == ([] if "bert.pooler.dense.weight" in read_weights(tmp_path) else
                                  ["pooler.dense.bias", "pooler.dense.weight"])
    torch.testing.assert_close(outputs(model, batch)["hidden"], outputs(theirs, batch)["hidden"], **TOL)


def test_a_masked_lm_folder_keeps_its_trained_head_in_pretraining_with_transformers_logits(tmp_path, batch):
    torch.manual_seed(4)
    theirs = hf_model(transformers.BertForMaskedLM)  # every head weight moved off its initial value
    theirs.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="freshly initialised"):
        model, report = load(tmp_path, BertForPreTraining)
    assert report.initialised == ["bert.pooler.dense.bias", "bert.pooler.dense.weight",
                                  "cls.seq_relationship.bias", "cls.seq_relationship.weight"]
    input_ids, attention_mask, token_type_ids = batch
    with torch.no_grad():
        ours = model(input_ids, attention_mask, token_type_ids).prediction_logits
        expected = theirs(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).logits
    torch.testing.assert_close(ours, expected, **TOL)


@pytest.mark.parametrize("decoder", ["present", "absent"])
def test_legacy_pretraining_layout(tmp_path, batch, hf_pretraining, decoder):
    state = legacy(hf_pretraining.state_dict())
    if decoder == "absent":
        state = {k: v for k, v in state.items() if "decoder" not in k}
    model, report = load(write_checkpoint(tmp_path, state), BertForPreTraining)
    assert report.initialised == []
    text = "\n".join(report.fixups)
    assert "gamma/beta" in text and "position_ids" in text
    assert ("decoder.weight" in text) == (decoder == "present")
    assert_same_model(model, hf_pretraining, batch)


def test_legacy_encoder_only_layout_with_bert_prefix(tmp_path, batch, hf_encoder):
    """An encoder saved under `bert.` with no heads at all (as some old uploads are)."""
    state = legacy({"bert." + k: v for k, v in hf_encoder.state_dict().items()})
    model, report = load(write_checkpoint(tmp_path, state, fmt="safetensors"), BertModel)
    assert report.initialised == [] and report.ignored == []
    assert len(report.fixups) == 3, report
    assert_same(outputs(model, batch), outputs(hf_encoder, batch))


def test_normalise_keys_is_a_pure_renaming(good_state):
    state = legacy(good_state)
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    normalised, fixups = normalise_keys(state, "bert.")
    assert normalised.keys() == good_state.keys()
    assert all(torch.equal(normalised[k], good_state[k]) for k in good_state)
    as_model, _ = normalise_keys(state, "")
    assert "embeddings.LayerNorm.weight" in as_model and "cls.predictions.bias" in as_model
    with pytest.raises(ValueError, match="prefix"):
        normalise_keys(state, "encoder.")


def test_safetensors_is_preferred_over_bin(tmp_path, good_state):
    write_checkpoint(tmp_path, good_state, fmt="safetensors")
    torch.save({k: torch.zeros_like(v) for k, v in good_state.items()}, tmp_path / "pytorch_model.bin")
    loaded = read_weights(tmp_path)
    assert torch.equal(loaded["cls.predictions.bias"], good_state["cls.predictions.bias"])


def test_half_precision_checkpoint_is_converted_and_reported(tmp_path, good_state):
    model, report = load(write_checkpoint(tmp_path, {k: v.half() for k, v in good_state.items()}),
                               BertForPreTraining)
    assert model.cls.predictions.bias.dtype == torch.float32
    assert any("from float16 to float32" in line for line in report.fixups)


def test_report_prints_readably(tmp_path, hf_encoder):
    with pytest.warns(UserWarning):
        _, report = load(save_hf(hf_encoder, tmp_path, "safetensors"), BertForPreTraining)
    text = str(report)
    assert text.splitlines()[0] == f"loaded BertForPreTraining from {tmp_path / 'model.safetensors'}"
    assert "fix-ups:\n  - added the 'bert.' prefix" in text
    assert "  - cls.seq_relationship.weight" in text
    assert str(LoadReport("BertModel", Path("w"))).endswith("every key copied as is")


# ----- what we save, transformers loads ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("ours_cls", [BertModel, BertForPreTraining])
def test_transformers_loads_what_we_save(tmp_path, batch, fmt, ours_cls):
    ours = perturb_(ours_cls(BertConfig.tiny()))
    save_model(ours, tmp_path, format=fmt)
    weights = {"safetensors": "model.safetensors", "bin": "pytorch_model.bin"}[fmt]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["config.json", weights])
    theirs, info = HF_CLASSES[ours_cls].from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert_same_model(ours, theirs.eval(), batch)
    if ours_cls is BertForPreTraining:  # transformers re-tied the decoder to the embeddings we saved
        assert theirs.cls.predictions.decoder.weight is theirs.bert.embeddings.word_embeddings.weight
    again, report = load(tmp_path, ours_cls)  # and our own round trip is exact, with no fix-ups
    assert report.fixups == [] and report.exact
    assert_same_model(again, ours, batch)


def test_save_replaces_the_other_format_and_writes_the_tokenizer(tmp_path):
    class Vocab:
        def save(self, directory):
            (Path(directory) / "vocab.txt").write_text("[PAD]\n")

    model = BertModel(BertConfig.tiny())
    save_model(model, tmp_path, format="safetensors")
    save_model(model, tmp_path, format="bin", tokenizer=Vocab())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "pytorch_model.bin", "vocab.txt"]
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == ["BertModel"]
    with pytest.raises(ValueError, match="format"):
        save_model(model, tmp_path, format="pt")
    with pytest.raises(TypeError, match="save"):
        save_model(model, tmp_path, tokenizer=object())


def test_save_refuses_shared_tensors(tmp_path):
    model = BertModel(BertConfig.tiny())
    # A tie, which safetensors cannot store: one tensor under two names.
    model.pooler.dense.weight = model.encoder.layer[0].attention.output.dense.weight
    with pytest.raises(CheckpointError, match="share memory"):
        save_model(model, tmp_path)


@pytest.mark.slow
def test_bert_base_sized_checkpoint_loads_strictly_in_modern_and_legacy_layouts(tmp_path):
    """transformers' BertConfig() (bert-base sizes), random weights, written both ways."""
    theirs = perturb_(transformers.BertForPreTraining(transformers.BertConfig()))
    batch = (torch.randint(1, 30522, (2, 8)), torch.tensor([[1] * 8, [1] * 5 + [0] * 3]),
             torch.zeros(2, 8, dtype=torch.long))

    modern, report = load(save_hf(theirs, tmp_path / "modern", "safetensors"), BertForPreTraining)
    assert report.exact and report.fixups == []
    assert_same_model(modern, theirs, batch, BASE_TOL)
    del modern

    encoder_state = legacy({k[len("bert."):]: v for k, v in theirs.state_dict().items()
                            if k.startswith("bert.")})
    old, report = load(write_checkpoint(tmp_path / "legacy", encoder_state, config={
        "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "vocab_size": 30522, "max_position_embeddings": 512}), BertModel)
    assert report.exact and len(report.fixups) == 2
    assert_same(outputs(old, batch), encoder_outputs(theirs, batch), BASE_TOL)


@pytest.mark.checkpoint
@pytest.mark.data
def test_real_embedded_checkpoint_matches_transformers_and_round_trips(tmp_path, embedded_model_dir,
                                                                       data_dir):
    """all-MiniLM-L6-v2 on 32 real SST dev sentences, padded to the longest: equal to 1e-5."""
    lines = (data_dir / "cs224n" / "ids-sst-dev.csv").read_text(encoding="utf-8").splitlines()
    sentences = [line.split("\t")[2].strip() for line in lines[1:33]]
    input_ids, attention_mask = tokenize(embedded_model_dir, sentences)
    assert input_ids.shape[0] == 32 and (attention_mask == 0).any()  # padding is exercised
    batch = (input_ids, attention_mask, torch.zeros_like(input_ids))

    ours, report = load(embedded_model_dir, BertModel)
    assert report.exact and any("position_ids" in line for line in report.fixups)  # its stale buffer
    theirs = transformers.BertModel.from_pretrained(embedded_model_dir).eval()
    expected = outputs(theirs, batch)
    mask = attention_mask.bool()
    got = outputs(ours, batch)
    torch.testing.assert_close(got["hidden"][mask], expected["hidden"][mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got["pooler"], expected["pooler"], atol=1e-5, rtol=1e-5)

    save_model(ours, tmp_path)
    reloaded = transformers.BertModel.from_pretrained(tmp_path).eval()
    again = outputs(reloaded, batch)
    torch.testing.assert_close(again["hidden"][mask], expected["hidden"][mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(again["pooler"], expected["pooler"], atol=1e-5, rtol=1e-5)


def tokenize(model_dir: Path, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) ids and mask from our tokenizer, else transformers' (the tokenizer is not the subject here)."""
    try:
        from minbert.text.tokenizer import BertTokenizer
    except ImportError:
        encoded = transformers.AutoTokenizer.from_pretrained(model_dir)(
            sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
        return encoded["input_ids"], encoded["attention_mask"]
    encoded = BertTokenizer.from_pretrained(model_dir).batch_encode(sentences, max_length=128)
    return encoded.input_ids, encoded.attention_mask


# ----- bad input: a clear error, never a silent wrong result -----------------------------------------


def test_wrong_shape_names_the_key_and_both_shapes(tmp_path, good_state):
    good_state["bert.encoder.layer.0.intermediate.dense.weight"] = torch.randn(36, 32)
    with pytest.raises(CheckpointError) as error:
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)
    message = str(error.value)
    assert "bert.encoder.layer.0.intermediate.dense.weight: checkpoint (36, 32), model (37, 32)" in message
    assert "config.json may not match the weights" in message and "pytorch_model.bin" in message


def test_config_that_does_not_match_the_weights(tmp_path, good_state):
    write_checkpoint(tmp_path, good_state, config={"vocab_size": 100})
    shapes = r"word_embeddings.weight: checkpoint \(99, 32\), model \(100, 32\)"
    with pytest.raises(CheckpointError, match=shapes):
        load(tmp_path, BertForPreTraining)
    write_checkpoint(tmp_path, good_state, config={"num_hidden_layers": 3})
    with pytest.raises(CheckpointError, match="weights have 2 layers, config.json says num_hidden_layers=3"):
        load(tmp_path, BertForPreTraining)
    write_checkpoint(tmp_path, good_state, config={"num_hidden_layers": 1})
    with pytest.raises(CheckpointError, match=r"unknown key\(s\): bert.encoder.layer.1"):
        load(tmp_path, BertForPreTraining)


def test_missing_keys_are_listed(tmp_path, good_state):
    del good_state["bert.encoder.layer.1.output.dense.bias"]
    with pytest.raises(CheckpointError, match=r"1 missing key\(s\): bert.encoder.layer.1.output.dense.bias"):
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)


def test_a_partly_missing_head_is_an_error_not_a_fresh_head(tmp_path, good_state):
    del good_state["cls.seq_relationship.bias"]
    with pytest.raises(CheckpointError, match=r"missing key\(s\): cls.seq_relationship.bias"):
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)


def test_unknown_keys_are_listed(tmp_path, good_state):
    good_state["bert.encoder.layer.0.extra.weight"] = torch.randn(2, 32)  # inside the encoder: a misfit
    with pytest.raises(CheckpointError, match=r"1 unknown key\(s\): bert.encoder.layer.0.extra.weight"):
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_truncated_weights_file(tmp_path, good_state, fmt):
    write_checkpoint(tmp_path, good_state, fmt=fmt)
    weights = next(tmp_path.glob("*.safetensors" if fmt == "safetensors" else "*.bin"))
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt") as error:
        load(tmp_path, BertForPreTraining)
    assert str(weights) in str(error.value)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all, just text"])
@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin"])
def test_corrupt_weights_file(tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(CheckpointError, match=name):
        read_weights(tmp_path)


def test_bin_with_python_objects_is_refused_not_unpickled(tmp_path, good_state):
    torch.save({**good_state, "optimizer": {"lr": Path("x")}}, tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="weights_only=True"):
        read_weights(tmp_path)


def test_training_checkpoint_that_nests_the_state_dict(tmp_path, good_state):
    torch.save({"state_dict": good_state, "step": torch.tensor(3)}, tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="under 'state_dict'"):
        read_weights(tmp_path)


def test_no_weights_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", **HF_TINY}))
    (tmp_path / "tf_model.h5").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"no weights file.*model.safetensors.*TensorFlow"):
        find_weights_file(tmp_path)
    with pytest.raises(ModelNotFoundError, match=r"not a checkpoint.*'tf_model.h5'"):
        load(tmp_path)


def test_untied_decoder_is_refused_for_pretraining_but_fine_for_the_encoder(tmp_path, good_state):
    good_state["cls.predictions.decoder.weight"] = torch.randn(99, 32)
    write_checkpoint(tmp_path, good_state)
    with pytest.raises(CheckpointError, match="untied masked-LM decoder"):
        load(tmp_path, BertForPreTraining)
    _, report = load(tmp_path, BertModel)
    assert "cls.predictions.decoder.weight" in report.ignored


def test_decoder_bias_that_differs_from_the_head_bias(tmp_path, good_state):
    good_state["cls.predictions.decoder.bias"] = good_state["cls.predictions.bias"] + 1
    with pytest.raises(CheckpointError, match="decoder.bias differs"):
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)


def test_untied_config_is_refused_for_pretraining(tmp_path, good_state):
    with pytest.raises(CheckpointError, match="tie_word_embeddings"):
        load(write_checkpoint(tmp_path, good_state, config={"tie_word_embeddings": False}),
                   BertForPreTraining)


def test_gamma_and_weight_both_present_is_ambiguous(tmp_path, good_state):
    good_state["bert.embeddings.LayerNorm.gamma"] = good_state["bert.embeddings.LayerNorm.weight"]
    with pytest.raises(CheckpointError, match="ambiguous"):
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)


def test_non_finite_weights_are_refused(tmp_path, good_state):
    good_state["bert.pooler.dense.bias"][3] = float("nan")
    with pytest.raises(CheckpointError, match="bert.pooler.dense.bias holds NaN"):
        load(write_checkpoint(tmp_path, good_state), BertForPreTraining)


def test_sharded_checkpoint(tmp_path, good_state, batch, hf_pretraining):
    keys = sorted(good_state)
    shards = {"model-00001-of-00002.safetensors": keys[:10], "model-00002-of-00002.safetensors": keys[10:]}
    weight_map = {}
    for name, part in shards.items():
        save_file({k: good_state[k] for k in part}, str(tmp_path / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in part})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", **HF_TINY}))
    model, _ = load(tmp_path, BertForPreTraining)
    assert_same_model(model, hf_pretraining, batch)

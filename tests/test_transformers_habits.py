"""The habits a `transformers` user brings to minbert's models (minbert/loading/pretrained.py), each held to
`transformers` on the same folder and weights.

Outputs read by attribute, key and index, with the same keys as `transformers`' (fields that are None are
no key); DistributedDataParallel and torch.compile take them. `dtype`, `device`, `num_parameters()` and the
input embeddings; `from_pretrained(dtype=...)` (torch_dtype, "auto") and `add_pooling_layer=False`;
`BertConfig.from_pretrained`; and a config.json that omits a size, refused in one line naming it.

Tolerance: float32 outputs agree to atol 1e-5 / rtol 1e-5 (test_model.py's: the two implementations sum in
different orders). Weights loaded in another dtype are compared exactly: both loaders convert the same
stored tensors.
"""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from pathlib import Path

import huggingface_hub
import pytest
import torch
import torch.distributed as dist
import transformers
from torch import nn

from minbert import BertConfig, BertForPreTraining, BertModel
from minbert.fast.unpadded import UnpaddedBertModel
from minbert.loading.config_json import REQUIRED_KEYS
from minbert.loading.pretrained import ConfigError
from minbert.heads import PreTrainingOutput
from minbert.model import BertModelOutput

TOL = dict(atol=1e-5, rtol=1e-5)
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, vocab_size=99,
            max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
HF_CLASSES = {BertModel: transformers.BertModel, UnpaddedBertModel: transformers.BertModel,
              BertForPreTraining: transformers.BertForPreTraining}


def perturbed(cls, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A tiny transformers model with every parameter moved off its init (a swapped bias would show)."""
    model = cls(transformers.BertConfig(**TINY, attn_implementation="eager"))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.to(dtype)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """transformers' own save_pretrained of a pre-training model, an encoder, and an encoder in bfloat16
    (config.json saying so), plus that last folder with the dtype key taken out."""
    torch.manual_seed(1)
    root = tmp_path_factory.mktemp("hf")
    made = {"pretraining": perturbed(transformers.BertForPreTraining),
            "encoder": perturbed(transformers.BertModel),
            "bf16": perturbed(transformers.BertModel, torch.bfloat16)}
    for name, model in made.items():
        model.save_pretrained(root / name)
    assert json.loads((root / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
    shutil.copytree(root / "bf16", root / "bf16-no-key")
    edit_config(root / "bf16-no-key", drop=("dtype", "torch_dtype"))
    return {name: root / name for name in (*made, "bf16-no-key")}


def edit_config(folder: Path, drop: tuple[str, ...] = (), **changes) -> None:
    values = json.loads((folder / "config.json").read_text())
    values = {k: v for k, v in {**values, **changes}.items() if k not in drop}
    (folder / "config.json").write_text(json.dumps(values))


def hf_load(cls, folder: Path, **kwargs) -> nn.Module:
    return HF_CLASSES[cls].from_pretrained(folder, attn_implementation="eager", **kwargs).eval()


@pytest.fixture
def batch():
    """Three sequences of length 11, two padded; a pair's segment ids."""
    input_ids = torch.randint(1, TINY["vocab_size"], (3, 11))
    attention_mask = torch.ones(3, 11, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 4:] = 0
    token_type_ids = torch.zeros(3, 11, dtype=torch.long)
    token_type_ids[0, 6:] = 1
    return dict(input_ids=input_ids * attention_mask, attention_mask=attention_mask,
                token_type_ids=token_type_ids)


# ----- outputs: attributes, keys, indices ---------------------------------------------------------------


@pytest.mark.parametrize("pooler", [True, False])
@pytest.mark.parametrize("asked", [{}, {"output_hidden_states": True}, {"output_attentions": True},
                                   {"output_hidden_states": True, "output_attentions": True}])
def test_encoder_output_has_the_keys_values_and_indices_of_transformers(folders, batch, pooler, asked):
    ours = BertModel.from_pretrained(folders["encoder"], attn_implementation="eager",
                                     add_pooling_layer=pooler)
    theirs = hf_load(BertModel, folders["encoder"], add_pooling_layer=pooler)
    with torch.no_grad():
        out, ref = ours(**batch, **asked), theirs(**batch, **asked)
    assert isinstance(out, BertModelOutput)
    # transformers adds an empty cross_attentions tuple whenever attentions are asked for; minbert has no
    # cross-attention (STYLE.md §4). It comes last, so every index below still lines up.
    keys = [k for k in ref if k != "cross_attentions"]
    assert list(out) == list(out.keys()) == keys and len(out) == len(keys)  # iterating gives the keys
    for name in ("last_hidden_state", "pooler_output", "hidden_states", "attentions"):
        assert (name in out) == (name in ref)
        assert (getattr(out, name) is None) == (getattr(ref, name) is None)
        if name not in ref:
            with pytest.raises(KeyError):
                ref[name]
            with pytest.raises(KeyError, match=f"'{name}' is not a key of this BertModelOutput"):
                out[name]
    for i, key in enumerate(keys):
        torch.testing.assert_close(out[key], ref[key], **TOL)
        torch.testing.assert_close(out[i], ref[i], **TOL)
    torch.testing.assert_close(out.to_tuple(), ref.to_tuple()[:len(keys)], **TOL)
    torch.testing.assert_close(out[1:], ref[1:len(keys)], **TOL)
    torch.testing.assert_close(out[-1], ref[len(keys) - 1], **TOL)
    torch.testing.assert_close(dict(**out), {k: ref[k] for k in keys}, **TOL)  # a mapping: ** works


@pytest.mark.parametrize("labelled", [True, False])
def test_pretraining_output_has_transformers_keys_in_its_order_then_the_two_losses(folders, batch, labelled):
    ours = BertForPreTraining.from_pretrained(folders["pretraining"], attn_implementation="eager")
    theirs = hf_load(BertForPreTraining, folders["pretraining"])
    labels = dict(labels=torch.where(batch["attention_mask"].bool(), batch["input_ids"], -100),
                  next_sentence_label=torch.tensor([0, 1, 0])) if labelled else {}
    with torch.no_grad():
        out, ref = ours(**batch, **labels, output_hidden_states=True), theirs(**batch, **labels,
                                                                             output_hidden_states=True)
    assert isinstance(out, PreTrainingOutput)
    assert list(out) == list(ref) + (["mlm_loss", "nsp_loss"] if labelled else [])
    torch.testing.assert_close(out.to_tuple()[:len(ref)], ref.to_tuple(), **TOL)
    assert out[0] is (out.loss if labelled else out.prediction_logits)


def test_distributed_data_parallel_finds_the_tensors_inside_an_output(folders, batch, tmp_path):
    """tasks/training/process.py's wrapping (find_unused_parameters) with the pooler left unused: DDP
    must find the output's tensors to see that, or the second step fails."""
    ours = BertModel.from_pretrained(folders["encoder"], attn_implementation="eager")
    theirs = hf_load(BertModel, folders["encoder"])
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        wrapped = nn.parallel.DistributedDataParallel(ours, find_unused_parameters=True)
        for _ in range(2):
            ours.zero_grad()
            out = wrapped(**batch)
            assert isinstance(out, BertModelOutput) and list(out) == ["last_hidden_state", "pooler_output"]
            out.last_hidden_state.sum().backward()
    finally:
        dist.destroy_process_group()
    theirs(**batch).last_hidden_state.sum().backward()
    reference = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        if name.startswith("pooler."):
            assert p.grad is None and reference[name].grad is None, name
        else:
            torch.testing.assert_close(p.grad, reference[name].grad, **TOL, msg=lambda m: f"{name}: {m}")


def test_torch_compile_takes_the_whole_model_and_its_output(folders, batch):
    ours = BertModel.from_pretrained(folders["encoder"])
    theirs = hf_load(BertModel, folders["encoder"])
    # fullgraph: the output's construction must not break the graph. The "eager" backend traces with
    # dynamo, as every backend does, but skips code generation, which would only slow the test down.
    compiled = torch.compile(ours, fullgraph=True, backend="eager")
    with torch.no_grad():
        out, ref = compiled(**batch, output_hidden_states=True), theirs(**batch, output_hidden_states=True)
    assert isinstance(out, BertModelOutput) and list(out) == list(ref)
    torch.testing.assert_close(dict(out), dict(ref), **TOL)


def test_an_output_is_a_dict_that_pickles_and_traces_as_transformers_does(folders, batch):
    """transformers' ModelOutput subclasses OrderedDict: isinstance(out, dict), and torch.jit.trace refuses a
    dict output unless strict=False, then gives it back as a dict."""
    ours = BertModel.from_pretrained(folders["encoder"])
    theirs = hf_load(BertModel, folders["encoder"])
    args = (batch["input_ids"], batch["attention_mask"])
    with torch.no_grad():
        out, ref = ours(*args), theirs(*args)
    assert isinstance(out, dict) and isinstance(ref, dict) and not isinstance(out, tuple)
    again = pickle.loads(pickle.dumps(out))
    assert type(again) is type(out) and list(again) == list(out) and again.pooler_output is not None
    for model in (ours, theirs):
        with pytest.raises(RuntimeError, match="Encountering a dict at the output of the tracer"):
            torch.jit.trace(model, args)
    traced = torch.jit.trace(ours, args, strict=False)
    with torch.no_grad():
        torch.testing.assert_close(traced(*args), dict(ref), **TOL)
        other = (batch["input_ids"][:2], batch["attention_mask"][:2])  # another batch size, the same graph
        torch.testing.assert_close(traced(*other)["last_hidden_state"], theirs(*other).last_hidden_state,
                                   **TOL)


@pytest.mark.parametrize("cls", [BertModel, UnpaddedBertModel])
def test_gradient_checkpointing_gives_transformers_gradients_and_the_same_with_dropout(folders, batch, cls):
    ours = cls.from_pretrained(folders["encoder"]).train()
    theirs = hf_load(BertModel, folders["encoder"]).train()
    ours.gradient_checkpointing_enable()
    theirs.gradient_checkpointing_enable()
    assert ours.is_gradient_checkpointing and theirs.is_gradient_checkpointing
    real = batch["attention_mask"][..., None]  # the unpadded model computes nothing at padding
    for model in (ours, theirs):
        (model(**batch).last_hidden_state * real).square().sum().backward()
    reference = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, reference[name].grad, **TOL, msg=lambda m: f"{name}: {m}")
    # With dropout on, the recomputed forward draws the same masks (checkpoint keeps the RNG state).
    dropping = cls(BertConfig.tiny(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)).train()
    grads = []
    for enabled in (False, True):
        dropping.gradient_checkpointing_enable() if enabled else dropping.gradient_checkpointing_disable()
        dropping.zero_grad()
        torch.manual_seed(4)
        dropping(**batch).last_hidden_state.square().sum().backward()
        grads.append([p.grad.clone() for p in dropping.parameters() if p.grad is not None])
    assert dropping.is_gradient_checkpointing
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-6)
    dropping.gradient_checkpointing_disable()
    assert not dropping.is_gradient_checkpointing


def test_save_pretrained_shards_as_transformers_does_and_transformers_loads_them(folders, batch, tmp_path):
    ours = BertModel.from_pretrained(folders["encoder"])
    theirs = hf_load(BertModel, folders["encoder"])
    ours.save_pretrained(tmp_path / "ours", max_shard_size="20KB")
    theirs.save_pretrained(tmp_path / "theirs", max_shard_size="20KB")
    names = sorted(p.name for p in (tmp_path / "ours").iterdir())
    theirs_names = sorted(p.name for p in (tmp_path / "theirs").iterdir())
    assert names == [name for name in theirs_names if name != "generation_config.json"]
    assert "model-00001-of-00005.safetensors" in names and "model.safetensors" not in names
    ours_index, theirs_index = (json.loads((tmp_path / d / "model.safetensors.index.json").read_text())
                                for d in ("ours", "theirs"))
    assert ours_index["metadata"] == theirs_index["metadata"] and set(ours_index) == set(theirs_index)
    # Which tensor goes in which shard: huggingface_hub's split, which transformers' save_pretrained calls (on
    # the state dict in the order it holds after its own loading, which may differ from the module's).
    split = huggingface_hub.split_torch_state_dict_into_shards(ours.state_dict(), max_shard_size="20KB")
    assert ours_index["weight_map"] == split.tensor_to_filename
    with torch.no_grad():
        for loaded in (hf_load(BertModel, tmp_path / "ours"), BertModel.from_pretrained(tmp_path / "ours")):
            torch.testing.assert_close(loaded(**batch).last_hidden_state, theirs(**batch).last_hidden_state,
                                       **TOL)
    ours.save_pretrained(tmp_path / "ours", max_shard_size=10**9)  # fits one file: the shards go
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == ["config.json", "model.safetensors"]
    with pytest.raises(ValueError, match="max_shard_size must be a number of bytes or a size such as '5GB'"):
        ours.save_pretrained(tmp_path / "bad", max_shard_size="5 parsecs")


def test_config_save_pretrained_writes_a_config_json_transformers_reads(tmp_path):
    config = BertConfig.tiny(hidden_dropout_prob=0.25)
    assert config.save_pretrained(tmp_path / "new") == tmp_path / "new" / "config.json"
    assert BertConfig.from_pretrained(tmp_path / "new") == config
    theirs = transformers.BertConfig.from_pretrained(tmp_path / "new")
    assert (theirs.hidden_size, theirs.intermediate_size, theirs.hidden_dropout_prob) == (32, 37, 0.25)


@pytest.mark.parametrize("grow, multiple", [(7, None), (-3, None), (2, 8)])
def test_resize_token_embeddings_draws_the_rows_transformers_draws(folders, batch, grow, multiple):
    ours = BertForPreTraining.from_pretrained(folders["pretraining"], attn_implementation="eager")
    theirs = hf_load(BertForPreTraining, folders["pretraining"])
    size = TINY["vocab_size"] + grow
    for model in (ours, theirs):
        torch.manual_seed(9)  # the same draw from N(mean, 1e-9 cov) of the old rows
        table = model.resize_token_embeddings(size, pad_to_multiple_of=multiple)
        assert table is model.get_input_embeddings()
    assert ours.config.vocab_size == ours.bert.config.vocab_size == theirs.config.vocab_size
    torch.testing.assert_close(ours.get_input_embeddings().weight, theirs.get_input_embeddings().weight,
                               atol=0, rtol=0)
    ids = batch["input_ids"].clamp(max=min(size, TINY["vocab_size"]) - 1)
    ids[0, 0] = ours.config.vocab_size - 1  # a new row, where the table grew
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, batch["attention_mask"]).prediction_logits,
                                   theirs(ids, batch["attention_mask"]).prediction_logits, **TOL)


# ----- what a transformers user asks of a model --------------------------------------------------------


@pytest.mark.parametrize("cls, folder, kwargs", [
    (BertModel, "encoder", {}),
    (BertModel, "pretraining", {"add_pooling_layer": False}),
    (UnpaddedBertModel, "encoder", {}),
    (BertForPreTraining, "pretraining", {}),
])
def test_dtype_device_num_parameters_and_input_embeddings_match_transformers(folders, cls, folder, kwargs):
    ours = cls.from_pretrained(folders[folder], dtype=torch.bfloat16, **kwargs)
    theirs = HF_CLASSES[cls].from_pretrained(folders[folder], dtype=torch.bfloat16, **kwargs)
    assert (ours.dtype, ours.device) == (theirs.dtype, theirs.device) == (torch.bfloat16, torch.device("cpu"))
    assert ours.get_input_embeddings().num_embeddings == TINY["vocab_size"]
    assert torch.equal(ours.get_input_embeddings().weight, theirs.get_input_embeddings().weight)
    ours.get_input_embeddings().weight.requires_grad_(False)
    theirs.get_input_embeddings().weight.requires_grad_(False)
    for only_trainable in (False, True):
        for exclude_embeddings in (False, True):
            counts = [m.num_parameters(only_trainable=only_trainable, exclude_embeddings=exclude_embeddings)
                      for m in (ours, theirs)]
            assert counts[0] == counts[1], (only_trainable, exclude_embeddings, counts)


def test_set_input_embeddings_swaps_the_table_as_in_transformers(folders, batch):
    ours = BertModel.from_pretrained(folders["encoder"])
    theirs = hf_load(BertModel, folders["encoder"])
    table = nn.Embedding(TINY["vocab_size"], TINY["hidden_size"])
    ours.set_input_embeddings(table)
    theirs.set_input_embeddings(table)
    assert ours.get_input_embeddings() is table
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).last_hidden_state, theirs(**batch).last_hidden_state, **TOL)


# ----- from_pretrained: dtype and add_pooling_layer ----------------------------------------------------


@pytest.mark.parametrize("folder, kwargs", [
    ("encoder", {"dtype": torch.bfloat16}),
    ("encoder", {"dtype": "float16"}),
    ("encoder", {"torch_dtype": torch.bfloat16}),  # transformers 4's name
    ("bf16", {"dtype": torch.float32}),
    ("bf16", {"dtype": "auto"}),  # config.json's dtype
    ("bf16-no-key", {"dtype": "auto"}),  # no key: the weights' dtype
    ("encoder", {"dtype": "auto"}),
])
def test_from_pretrained_loads_in_the_dtype_transformers_does(folders, folder, kwargs):
    ours = BertModel.from_pretrained(folders[folder], **kwargs)
    theirs = transformers.BertModel.from_pretrained(folders[folder], **kwargs)
    assert ours.dtype == theirs.dtype
    reference = theirs.state_dict()
    for key, value in ours.state_dict().items():
        assert value.dtype == reference[key].dtype and torch.equal(value, reference[key]), key


def test_from_pretrained_defaults_to_float32_and_save_pretrained_records_the_dtype(folders, tmp_path):
    """transformers 5 defaults to "auto"; minbert keeps float32 (the weights training updates), as
    transformers 4 did. What it saves says its dtype, so "auto" reads it back in both."""
    ours = BertModel.from_pretrained(folders["bf16"])
    assert ours.dtype == torch.float32
    assert any("from bfloat16 to float32" in line for line in ours.load_report.fixups)
    ours.to(torch.bfloat16).save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert (BertModel.from_pretrained(tmp_path, dtype="auto").dtype
            == transformers.BertModel.from_pretrained(tmp_path, dtype="auto").dtype == torch.bfloat16)


def test_dtype_errors_name_the_argument_or_the_file(folders, tmp_path):
    with pytest.raises(ValueError, match=r"from_pretrained's dtype must be a floating-point torch.dtype or "
                                         r"its name \(float32, bfloat16, float16, float64\).*got 'int8'"):
        BertModel.from_pretrained(folders["encoder"], dtype="int8")
    with pytest.raises(ValueError, match="got dtype=torch.float16 and torch_dtype=torch.bfloat16: give one"):
        BertModel.from_pretrained(folders["encoder"], dtype=torch.float16, torch_dtype=torch.bfloat16)
    shutil.copytree(folders["encoder"], tmp_path / "model")
    edit_config(tmp_path / "model", dtype="float4")
    with pytest.raises(ValueError, match=rf"{tmp_path / 'model' / 'config.json'}: dtype must be .*'float4'"):
        BertModel.from_pretrained(tmp_path / "model", dtype="auto")


@pytest.mark.parametrize("folder", ["pretraining", "encoder"])
def test_add_pooling_layer_false_ignores_the_checkpoints_pooler_as_transformers_does(folders, batch, folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is freshly initialised, so nothing to warn about
        ours, report = BertModel.from_pretrained(folders[folder], add_pooling_layer=False, return_report=True)
    theirs, info = transformers.BertModel.from_pretrained(folders[folder], add_pooling_layer=False,
                                                          output_loading_info=True)
    assert ours.pooler is None and theirs.pooler is None and not info["missing_keys"]
    assert report.exact and set(report.ignored) == {k.removeprefix("bert.") for k in info["unexpected_keys"]}
    assert {"pooler.dense.weight", "pooler.dense.bias"} <= set(report.ignored)
    with torch.no_grad():
        out, ref = ours(**batch), theirs.eval()(**batch)
    assert list(out) == list(ref) == ["last_hidden_state"]
    torch.testing.assert_close(out.last_hidden_state, ref.last_hidden_state, **TOL)


def test_pretraining_model_has_no_add_pooling_layer_as_in_transformers(folders):
    """Its next-sentence head reads the pooler, so neither library offers to leave the pooler out."""
    for cls in (BertForPreTraining, transformers.BertForPreTraining):
        with pytest.raises(TypeError, match="unexpected keyword argument 'add_pooling_layer'"):
            cls.from_pretrained(folders["pretraining"], add_pooling_layer=False)


# ----- BertConfig.from_pretrained, and a config.json that omits a size ---------------------------------


def assert_same_config(ours: BertConfig, theirs: transformers.BertConfig) -> None:
    """Every field both have (transformers 5's BertConfig has no position_embedding_type); the sizes are
    among them."""
    shared = [name for name in BertConfig.__dataclass_fields__ if hasattr(theirs, name)]
    assert set(REQUIRED_KEYS) <= set(shared)
    for name in shared:
        assert getattr(ours, name) == getattr(theirs, name), name


def test_config_from_pretrained_reads_a_folder_its_config_json_and_a_cache_name(folders, tmp_path,
                                                                                monkeypatch):
    assert_same_config(BertConfig.from_pretrained(folders["encoder"]),
                       transformers.BertConfig.from_pretrained(folders["encoder"]))
    alone = tmp_path / "config-only"  # a config needs no weights beside it, in either library
    alone.mkdir()
    shutil.copy(folders["pretraining"] / "config.json", alone)
    assert_same_config(BertConfig.from_pretrained(alone), transformers.BertConfig.from_pretrained(alone))
    assert_same_config(BertConfig.from_pretrained(str(alone / "config.json")),
                       transformers.BertConfig.from_pretrained(alone / "config.json"))
    # A name in the Hugging Face cache, laid out as huggingface_hub lays it out (refs/main -> snapshot).
    cache, commit = tmp_path / "cache", "0" * 40
    snapshot = cache / "models--org--tiny-bert" / "snapshots" / commit
    shutil.copytree(folders["encoder"], snapshot)
    (cache / "models--org--tiny-bert" / "refs").mkdir()
    (cache / "models--org--tiny-bert" / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    assert_same_config(BertConfig.from_pretrained("org/tiny-bert"),
                       transformers.BertConfig.from_pretrained("org/tiny-bert", cache_dir=cache,
                                                               local_files_only=True))


@pytest.mark.checkpoint
def test_config_from_pretrained_of_the_embedded_default(embedded_model_dir):
    theirs = transformers.BertConfig.from_pretrained(embedded_model_dir)
    for name in (None, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", embedded_model_dir):
        assert_same_config(BertConfig.from_pretrained(name), theirs)


@pytest.mark.parametrize("drop, named", [
    (("hidden_size",), "hidden_size"),
    (("hidden_size", "num_attention_heads"), "hidden_size, num_attention_heads"),
])
def test_a_config_json_without_a_size_is_one_line_naming_it(folders, tmp_path, drop, named):
    """transformers fills a missing size with bert-base's (hidden_size 768) and then reports every weight's
    shape; a missing num_attention_heads would not even mismatch a shape. minbert names the key."""
    folder = tmp_path / "model"
    shutil.copytree(folders["encoder"], folder)
    edit_config(folder, drop=drop)
    assert transformers.BertConfig.from_pretrained(folder).hidden_size == 768  # what a default would build
    expected = (f"{folder / 'config.json'} lacks {named} (a BERT config.json states its sizes; minbert does "
                "not guess bert-base's)")
    for load in (BertModel.from_pretrained, BertConfig.from_pretrained):
        with pytest.raises(ConfigError) as error:
            load(folder)
        assert str(error.value) == expected


# ----- config.json's keys: unknown ones ignored and reported, meanings we do not implement refused -------------


def test_unknown_config_keys_are_ignored_as_transformers_does_and_listed_in_the_load_report(folders, tmp_path,
                                                                                          batch):
    folder = tmp_path / "model"
    shutil.copytree(folders["encoder"], folder)
    extra = {"_attn_implementation_autoset": True, "id2label": {"0": "A"}, "frobnicate": 1}
    edit_config(folder, **extra)
    ours, theirs = BertModel.from_pretrained(folder), hf_load(BertModel, folder)
    assert ours.load_report.ignored_config == sorted(extra)
    assert "config.json keys ignored" in str(ours.load_report) and "frobnicate" in str(ours.load_report)
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).last_hidden_state, theirs(**batch).last_hidden_state)
    # transformers' own bookkeeping keys (and what our save writes) are known, not listed
    assert BertModel.from_pretrained(folders["encoder"]).load_report.ignored_config == []


@pytest.mark.parametrize("key, value", [
    ("is_decoder", True), ("add_cross_attention", True), ("position_embedding_type", "relative_key"),
    ("hidden_act", "gelu_new"), ("pruned_heads", {"0": [1]}), ("model_type", "roberta"),
    ("is_decoder", "no"), ("hidden_size", "32"), ("layer_norm_eps", 0), ("num_hidden_layers", True),
])
def test_config_keys_whose_value_changes_the_model_are_refused_naming_key_and_value(folders, tmp_path, key,
                                                                                  value):
    folder = tmp_path / "model"
    shutil.copytree(folders["encoder"], folder)
    edit_config(folder, **{key: value})
    with pytest.raises(ConfigError) as error:
        BertModel.from_pretrained(folder)
    assert str(error.value).startswith(f"{folder / 'config.json'}: {key} ")
    assert json.dumps(value) in str(error.value) or repr(value) in str(error.value), error.value

"""The library's public boundaries hold their contracts, for faults drawn from a grammar (hypothesis).

Each boundary either accepts an input with a defined result (the one transformers or sentence-transformers
gives, where they define one) or refuses it with a ValueError or TypeError (or our subclasses: ConfigError,
CheckpointError, FileContentError; FileNotFoundError for a missing file) whose message names the argument,
the field or the file. Never another exception, never a different result without a word, nothing
half-written by a refused save. The boundaries and the faults drawn for each:

- BertModel / UnpaddedBertModel / BertForPreTraining forward (minbert/loading/forward_contract.py): each
  argument's dtype, rank, shape, a mismatch with the ids' shape, values out of range, NaN and inf, empty, not a
  tensor; and what is accepted (narrow integer ids, bool or float 0/1 masks, a batch of 0) gives the same vectors
  in the eager, SDPA and unpadded kernels;
- config.json: each field replaced by a value of every wrong kind (null, a string, a bool, a list, an
  object, negative, 0, a fraction, NaN, inf) or deleted;
- a model folder's files (config.json, weights, vocab.txt, tokenizer_config.json, sentence-transformers'
  four files): missing, empty, binary, not UTF-8, truncated, a folder in the file's place, unreadable;
- tokenizer_config.json's fields; the tokenizer's call; SentenceEncoder's construction, encode,
  similarity and save; AdamW's hyper-parameters and parameter lists.

Examples per property: 30 by default (the file runs in about 30 s on 2 busy cores); MINBERT_FUZZ_EXAMPLES=500
for a longer, nightly-style run (docs/bad_input.md). No deadline: a cold call can be slow on a busy machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minbert.loading.files
from minbert.config import BertConfig
from minbert.loading.config_json import REQUIRED_KEYS
from minbert.fast.unpadded import UnpaddedBertModel
from minbert.heads import BertForPreTraining
from minbert.loading.checkpoint import CheckpointError, save_model
from minbert.loading.files import FileContentError
from minbert.loading.pretrained import ConfigError
from minbert.model import BertModel
from minbert.sentence_encoder import SentenceEncoder
from minbert.text.tokenizer import BertTokenizer
from optim import AdamW

EXAMPLES = int(os.environ.get("MINBERT_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
REFUSALS = (ValueError, TypeError, FileNotFoundError, NotADirectoryError)  # ConfigError & co. are ValueErrors
REPO = Path(__file__).resolve().parents[1]

CONFIG = BertConfig.tiny()  # vocab 99, hidden 32, 4 heads, 64 positions, 2 segment types
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]  # 99 tokens
IDS = torch.tensor([[2, 10, 11, 12, 3], [2, 13, 3, 0, 0]])  # (B, T) = (2, 5), the second row padded
MASK = (IDS != 0).long()


@pytest.fixture(scope="module")
def models() -> dict[str, BertModel]:
    """The three kernels on one set of weights, in eval mode."""
    torch.manual_seed(0)
    eager = BertModel(CONFIG, attn_implementation="eager").eval()
    sdpa, unpadded = BertModel(CONFIG).eval(), UnpaddedBertModel(CONFIG).eval()
    sdpa.load_state_dict(eager.state_dict())
    unpadded.load_state_dict(eager.state_dict())
    return {"eager": eager, "sdpa": sdpa, "unpadded": unpadded}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, models) -> Path:
    """A sentence-transformers folder of the tiny model: weights, tokenizer and the four settings files."""
    directory = tmp_path_factory.mktemp("tiny-sentence-model")
    SentenceEncoder(models["eager"], BertTokenizer(VOCAB), device="cpu").save(directory)
    return directory


def names(error: BaseException, *words: str) -> bool:
    """Whether the message holds every word (case-insensitive)."""
    return all(word.lower() in str(error).lower() for word in words)


def refused(call, *words: str, allowed: tuple = REFUSALS) -> BaseException:
    """call() must raise one of `allowed` whose message names every word; returns the error."""
    with pytest.raises(allowed) as caught:
        call()
    assert names(caught.value, *words), f"{type(caught.value).__name__}: {caught.value} (should name {words})"
    return caught.value


# ----- BertModel.forward --------------------------------------------------------------------------------

# Each fault: (argument the message must name, a function of (draw, inputs) that spoils the inputs).


def _put(draw, tensor: torch.Tensor, value) -> torch.Tensor:
    """A copy with `value` at one drawn position (float when the value is)."""
    out = tensor.float() if isinstance(value, float) else tensor.clone()
    b = draw(st.integers(0, out.shape[0] - 1))
    t = draw(st.integers(0, out.shape[1] - 1))
    out[b, t] = value
    return out


def _reshape(draw, tensor: torch.Tensor) -> torch.Tensor:
    """Another rank, or the right rank with another size along one axis."""
    return draw(st.sampled_from([
        lambda x: x[0], lambda x: x[None], lambda x: x[..., None], lambda x: x[:, :-1], lambda x: x[:1],
        lambda x: torch.cat([x, x[:, :1]], dim=1), lambda x: torch.cat([x, x[:1]], dim=0)]))(tensor)


NOT_BOOLS = st.sampled_from(["no", "yes", 1, 0, None, [], 1.0])  # a switch is True or False, not truthy
NOT_ID_DTYPES = [torch.bool, torch.float16, torch.float32, torch.float64, torch.complex64]

FORWARD_FAULTS = {
    "input_ids": [
        lambda d, kw: kw.update(input_ids=kw["input_ids"].to(d(st.sampled_from(NOT_ID_DTYPES)))),
        lambda d, kw: kw.update(input_ids=d(st.sampled_from([lambda x: x[0], lambda x: x[None],
                                                             lambda x: x[..., None]]))(kw["input_ids"])),
        lambda d, kw: kw.update(input_ids=_put(d, kw["input_ids"], d(st.one_of(
            st.integers(CONFIG.vocab_size, 10**6), st.integers(-10**6, -1))))),
        lambda d, kw: kw.update(input_ids=d(st.sampled_from([lambda x: x.tolist(), lambda x: x.numpy()]))(
            kw["input_ids"])),
        lambda d, kw: kw.update({k: v[:, :0] for k, v in kw.items()}),  # no tokens
    ],
    "attention_mask": [
        lambda d, kw: kw.update(attention_mask=_put(d, kw["attention_mask"], d(st.one_of(
            st.sampled_from([2, -1, 3, 255]), st.sampled_from([0.5, -0.0001, 1.5, math.nan, math.inf]))))),
        lambda d, kw: kw.update(attention_mask=_reshape(d, kw["attention_mask"])),
        lambda d, kw: kw.update(attention_mask=kw["attention_mask"].to(torch.complex64)),
        lambda d, kw: kw.update(attention_mask=kw["attention_mask"].tolist()),
    ],
    "token_type_ids": [
        lambda d, kw: kw.update(token_type_ids=_put(d, kw["token_type_ids"], d(st.one_of(
            st.integers(CONFIG.type_vocab_size, 1000), st.integers(-1000, -1))))),
        lambda d, kw: kw.update(token_type_ids=_reshape(d, kw["token_type_ids"])),
        lambda d, kw: kw.update(token_type_ids=kw["token_type_ids"].to(d(st.sampled_from(NOT_ID_DTYPES)))),
    ],
    "inputs_embeds": [
        lambda d, kw: kw.update(input_ids=None, inputs_embeds=torch.zeros(
            2, 5, CONFIG.hidden_size + d(st.sampled_from([-31, -1, 1, 32])))),
        lambda d, kw: kw.update(input_ids=None, inputs_embeds=torch.zeros(2, 5, CONFIG.hidden_size).to(
            d(st.sampled_from([torch.long, torch.bool, torch.float64, torch.float16, torch.complex64])))),
        lambda d, kw: kw.update(input_ids=None, inputs_embeds=d(st.sampled_from([
            torch.zeros(5, CONFIG.hidden_size), torch.zeros(1, 2, 5, CONFIG.hidden_size)]))),
        lambda d, kw: kw.update(input_ids=None, inputs_embeds=_put(
            d, torch.zeros(2, 5, CONFIG.hidden_size), d(st.sampled_from([math.nan, math.inf, -math.inf])))),
        lambda d, kw: kw.update(inputs_embeds=torch.zeros(2, 5, CONFIG.hidden_size)),  # both
        lambda d, kw: kw.update(input_ids=None),  # neither
    ],
    "output_hidden_states": [lambda d, kw: kw.update(output_hidden_states=d(NOT_BOOLS))],
    "output_attentions": [lambda d, kw: kw.update(output_attentions=d(NOT_BOOLS))],
}


@st.composite
def forward_faults(draw) -> tuple[str, dict]:
    """(the argument the error must name, BertModel.forward's keyword arguments with one fault)."""
    argument = draw(st.sampled_from(sorted(FORWARD_FAULTS)))
    inputs = dict(input_ids=IDS.clone(), attention_mask=MASK.clone(), token_type_ids=torch.zeros_like(IDS))
    draw(st.sampled_from(FORWARD_FAULTS[argument]))(draw, inputs)
    return argument, inputs


@FUZZ
@given(fault=forward_faults(), kernel=st.sampled_from(["eager", "sdpa", "unpadded"]))
def test_a_fault_in_any_forward_argument_is_refused_naming_it(models, fault, kernel):
    argument, inputs = fault
    refused(lambda: models[kernel](**inputs), argument)


def test_the_position_table_and_the_pretraining_labels_are_checked(models):
    for kernel in models.values():
        refused(lambda: kernel(torch.full((2, 65), 5), torch.ones(2, 65)), "max_position_embeddings", "65")
    model = BertForPreTraining(CONFIG)
    for labels, word in [(torch.full_like(IDS, 99), "labels"), (torch.full_like(IDS, -5), "labels"),
                         (IDS[:, :3], "labels"), (IDS.float(), "labels")]:
        refused(lambda: model(IDS, MASK, labels=labels), word)
    for label in [torch.tensor([0, 2]), torch.tensor([0, 1, 1]), torch.tensor([[0, 1]]),
                  torch.tensor([0.0, 1.0])]:
        refused(lambda: model(IDS, MASK, next_sentence_label=label), "next_sentence_label")
    model(IDS, MASK, labels=torch.where(MASK.bool(), IDS, -100), next_sentence_label=torch.tensor([[0], [1]]))


@st.composite
def accepted_batches(draw) -> tuple[torch.Tensor, torch.Tensor]:
    """A valid batch in any dtype the contract accepts: (ids, mask)."""
    B = draw(st.integers(0, 3))
    lengths = [draw(st.integers(1, 8)) for _ in range(B)]
    T = max(lengths, default=draw(st.integers(1, 8)))
    ids = torch.zeros(B, T, dtype=torch.long)
    for b, n in enumerate(lengths):
        tokens = st.lists(st.integers(1, CONFIG.vocab_size - 1), min_size=n, max_size=n)
        ids[b, :n] = torch.tensor(draw(tokens))
    mask = (ids != 0)
    ids_dtype = draw(st.sampled_from([torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]))
    mask_dtype = draw(st.sampled_from([torch.bool, torch.int64, torch.int8, torch.float32, torch.float16]))
    return ids.to(ids_dtype), mask.to(mask_dtype)


@FUZZ
@given(batch=accepted_batches())
def test_what_the_contract_accepts_gives_the_same_vectors_in_every_kernel(models, batch):
    """Narrow integer ids and bool/int/float 0-1 masks mean what int64 ids and a long mask mean (as in
    transformers); the three kernels agree on every real token (tolerance 1e-5, float32)."""
    ids, mask = batch
    with torch.no_grad():
        reference = models["eager"](ids.long(), mask.long()).last_hidden_state
        real = mask.bool()
        for kernel in models.values():
            out = kernel(ids, mask).last_hidden_state
            assert out.shape == (*ids.shape, CONFIG.hidden_size)
            torch.testing.assert_close(out[real], reference[real], atol=1e-5, rtol=1e-5)


# ----- config.json --------------------------------------------------------------------------------------

WRONG_VALUES = st.sampled_from([None, "x", "12", True, False, [], {}, -1, 0, 0.5, 1.5, -0.1, math.nan,
                                math.inf, 2**70, 7])


@FUZZ
@given(field=st.sampled_from([f.name for f in dataclasses.fields(BertConfig)]),
       value=st.one_of(WRONG_VALUES, st.just(KeyError)))
def test_each_config_field_wrong_or_missing_is_named_or_read_exactly(tmp_path_factory, field, value):
    """A value is read as it is (no coercion: "12" never becomes 12, true never 1) or refused naming the
    field and the file; a missing size is named; a missing setting takes BertConfig's default."""
    values = CONFIG.to_dict()
    if value is KeyError:
        del values[field]
    else:
        values[field] = value
    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_text(json.dumps(values))
    try:
        config = BertConfig.from_json_file(path)
    except ConfigError as error:
        assert names(error, str(path), field), error
        return
    if value is KeyError:
        assert field not in REQUIRED_KEYS
        assert getattr(config, field) == getattr(BertConfig(), field)
    else:
        read = getattr(config, field)
        assert type(read) is type(value) and (read == value or read is value), (field, value, read)


def test_pad_token_id_null_means_no_padding_row_as_in_transformers(tmp_path):
    """transformers' BertEmbeddings passes pad_token_id to nn.Embedding as padding_idx, None included."""
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG.to_dict(), "pad_token_id": None}))
    model = BertModel(BertConfig.from_json_file(tmp_path))
    assert model.embeddings.word_embeddings.padding_idx is None
    assert model.embeddings.word_embeddings.weight[0].abs().sum() > 0  # no row kept at zero
    assert BertConfig.from_dict(model.config.to_dict()).pad_token_id is None  # and it is saved as null


# ----- a model folder's files ---------------------------------------------------------------------------

FOLDER_FILES = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "modules.json",
                "sentence_bert_config.json", "1_Pooling/config.json", "config_sentence_transformers.json"]
FILE_FAULTS = ["missing", "empty", "binary", "not UTF-8", "truncated", "a folder", "a named pipe", "unreadable"]


@contextlib.contextmanager
def unreadable(path: Path):
    """The file cannot be opened for reading: chmod 000, or, as root (whom chmod does not stop), an open()
    in loading/files.py, where every reader of a folder's files starts, that fails as chmod would."""
    if os.geteuid() != 0:
        path.chmod(0)
        try:
            yield
        finally:
            path.chmod(0o644)
        return

    def deny(file, *args, **kwargs):
        if Path(file) == path:
            raise PermissionError(13, "Permission denied", str(file))
        return open(file, *args, **kwargs)
    with mock.patch.object(minbert.loading.files, "open", deny, create=True):
        yield


def spoil(path: Path, fault: str, cut: float) -> None:
    """Apply one file fault (all but "unreadable", which is a context)."""
    data = path.read_bytes()
    if fault in ("missing", "a folder", "a named pipe"):
        path.unlink()
        if fault == "a folder":
            path.mkdir()
        if fault == "a named pipe":  # opened, it would wait for a writer for ever
            os.mkfifo(path)
    elif fault == "empty":
        path.write_bytes(b"")
    elif fault == "binary":
        path.write_bytes(bytes(range(256)) * 3)
    elif fault == "not UTF-8":
        path.write_bytes(data[:len(data) // 2] + b"\xff\xfe\xe9" + data[len(data) // 2:])
    elif fault == "truncated":
        path.write_bytes(data[:int(len(data) * cut)])


@FUZZ
@given(name=st.sampled_from(FOLDER_FILES), fault=st.sampled_from(FILE_FAULTS), cut=st.floats(0.01, 0.99))
def test_each_file_of_a_model_folder_spoiled_is_named_or_loads_as_defined(tmp_path_factory, model_dir, name,
                                                                           fault, cut):
    """SentenceEncoder(folder) reads every file of the folder. A spoiled file is refused naming it (a
    folder where it belongs: "folder"; unreadable: "permission", never "download again"), or, where the
    file is optional or still says the same, the folder loads and encodes to finite vectors."""
    folder = tmp_path_factory.mktemp("spoiled") / "model"
    shutil.copytree(model_dir, folder)
    path = folder / name
    spoil(path, fault, cut)
    context = unreadable(path) if fault == "unreadable" else contextlib.nullcontext()
    try:
        with context:
            encoder = SentenceEncoder(folder, device="cpu")
    except REFUSALS as error:
        assert names(error, name.split("/")[-1]) or names(error, "1_Pooling"), f"{type(error).__name__}: " \
            f"{error}"
        if fault == "a folder":
            assert names(error, "folder") or "no vocab.txt" in str(error), error
        if fault == "unreadable":
            assert names(error, "permission") and "download" not in str(error), error
        if fault == "a named pipe":
            assert names(error, "not a regular file"), error
        return
    needed = ("config.json", "model.safetensors")
    assert fault in ("missing", "truncated", "not UTF-8") and name not in needed, f"{name}: {fault} accepted"
    vectors = encoder.encode(["w1 w2", "w3"])
    assert vectors.shape == (2, CONFIG.hidden_size) and np.isfinite(vectors).all()


TOKENIZER_FIELDS = {"do_lower_case": bool, "strip_accents": (bool, type(None)),
                    "tokenize_chinese_chars": bool, "model_max_length": (int, type(None)),
                    "unk_token": "[UNK]", "mask_token": "[MASK]", "pad_token": "[PAD]"}


@FUZZ
@given(field=st.sampled_from(sorted(TOKENIZER_FIELDS)), value=WRONG_VALUES)
def test_each_tokenizer_config_field_of_a_wrong_kind_is_named(tmp_path_factory, model_dir, field, value):
    folder = tmp_path_factory.mktemp("tokenizer")
    shutil.copy(model_dir / "vocab.txt", folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({field: value}))
    try:
        tokenizer = BertTokenizer.from_pretrained(folder)
    except FileContentError as error:
        assert names(error, "tokenizer_config.json", field), error
        return
    expected = TOKENIZER_FIELDS[field]
    if isinstance(expected, str):
        raise AssertionError(f"{field}={value!r} accepted")
    assert isinstance(value, expected), value
    assert not (field == "model_max_length" and isinstance(value, bool)), value
    read = {"do_lower_case": tokenizer.lowercase, "strip_accents": tokenizer.strip_accents,
            "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
            "model_max_length": tokenizer.model_max_length}[field]
    unset = field == "model_max_length" and (value is None or value >= 10**6)  # transformers' "unset": 512
    assert read == (512 if unset else value)


def test_a_vocabulary_larger_than_the_model_is_refused_at_load_naming_both_numbers(tmp_path, model_dir,
                                                                                   models):
    shutil.copytree(model_dir, tmp_path / "model")
    with open(tmp_path / "model" / "vocab.txt", "a", encoding="utf-8") as file:
        file.write("".join(f"extra{i}\n" for i in range(20)))
    refused(lambda: BertTokenizer.from_pretrained(tmp_path / "model"), "vocab.txt", "119", "99")
    refused(lambda: SentenceEncoder(tmp_path / "model", device="cpu"), "vocab.txt", "119", "99")
    refused(lambda: SentenceEncoder(models["eager"], BertTokenizer(VOCAB + ["extra"])), "100", "99")


# ----- the tokenizer's call -----------------------------------------------------------------------------

BAD_TEXTS = st.sampled_from([None, 3, 2.5, b"w1", {"a": 1}, ["w1", None], ["w1", 3], [["w1"]], [("w1",)],
                             [("w1", "w2", "w3")], [("w1", 3)], object()])
CALL_FAULTS = st.one_of(
    st.tuples(st.just("text"), st.fixed_dictionaries({"text": BAD_TEXTS})),
    st.tuples(st.just("text_pair"), st.fixed_dictionaries({
        "text": st.just(["w1", "w2"]),
        "text_pair": st.sampled_from([["w3"], ["w3", None], "w3", 5, ["w3", "w4", "w5"]])})),
    st.tuples(st.just("max_length"), st.fixed_dictionaries({
        "text": st.just("w1"), "max_length": st.sampled_from([0, 1, -5, 2.0, "10", True, [10]])})),
    st.tuples(st.just("padding"), st.fixed_dictionaries({"text": st.just("w1"), "padding": st.sampled_from(
        ["maybe", 1, None, "LONGEST"])})),
    st.tuples(st.just("truncation"), st.fixed_dictionaries({
        "text": st.just("w1"), "truncation": st.sampled_from(["sideways", 1, None, "ONLY_FIRST"])})),
    st.tuples(st.just("return_tensors"), st.fixed_dictionaries({
        "text": st.just("w1"), "return_tensors": st.sampled_from(["tf", "jax", 1])})),
)


@FUZZ
@given(fault=CALL_FAULTS)
def test_a_wrong_tokenizer_argument_is_refused_naming_it(fault):
    argument, kwargs = fault
    tokenizer = BertTokenizer(VOCAB)
    refused(lambda: tokenizer(**kwargs), argument, allowed=(TypeError, ValueError))


@FUZZ
@given(ids=st.sampled_from([[1.5], [99], [-1], [10**9], ["w1"], [None], [True]]))
def test_decode_refuses_what_is_not_an_id(ids):
    refused(lambda: BertTokenizer(VOCAB).decode(ids), "id", allowed=(TypeError, ValueError))


# ----- SentenceEncoder ----------------------------------------------------------------------------------

ENCODER_FAULTS = st.one_of(
    st.tuples(st.just("sentences"), st.just("encode"), st.fixed_dictionaries({"sentences": BAD_TEXTS.filter(
        lambda x: not isinstance(x, list) or x not in ([("w1",)], [["w1"]]))})),
    st.tuples(st.just("batch_size"), st.just("encode"), st.fixed_dictionaries({
        "sentences": st.just(["w1"]), "batch_size": st.sampled_from([0, -1, 2.5, "8", True, None])})),
    st.tuples(st.just("truncate_dim"), st.sampled_from(["encode", "init"]), st.fixed_dictionaries({
        "truncate_dim": st.sampled_from([0, -3, 2.5, "8", True, [8]])})),
    st.tuples(st.just("normalize"), st.just("init"), st.fixed_dictionaries({"normalize": st.sampled_from(
        ["no", 1, 0.0, [True]])})),
    st.tuples(st.just("prompts"), st.just("init"), st.fixed_dictionaries({"prompts": st.sampled_from(
        [["query: "], "query: ", {"q": 1}, {1: "query: "}])})),
    st.tuples(st.just("pooling"), st.just("init"), st.fixed_dictionaries({"pooling": st.sampled_from(
        ["bogus", "MEAN", 1])})),
    st.tuples(st.sampled_from(["convert_to_tensor", "convert_to_numpy", "normalize_embeddings",
                               "show_progress_bar"]), st.just("encode"), st.just({})).flatmap(
        lambda f: st.tuples(st.just(f[0]), st.just("encode"), st.fixed_dictionaries({f[0]: NOT_BOOLS.filter(
            lambda v: v is not None or f[0] != "show_progress_bar")}))),
    st.tuples(st.sampled_from(["prompt", "prompt_name"]), st.just("encode"), st.just({})).flatmap(
        lambda f: st.tuples(st.just(f[0]), st.just("encode"), st.fixed_dictionaries({f[0]: st.sampled_from(
            [5, b"query: ", ["query: "]])}))),
    st.tuples(st.just("device"), st.sampled_from(["encode", "init"]), st.fixed_dictionaries({
        "device": st.sampled_from(["tpu", "cuda:x", "", 3.5])})),
    st.tuples(st.just("max_seq_length"), st.just("init"), st.fixed_dictionaries({
        "max_seq_length": st.sampled_from([1, 65, -1, 2.5, "64"])})),
)


@FUZZ
@given(fault=ENCODER_FAULTS)
def test_a_wrong_sentence_encoder_argument_is_refused_naming_it(models, fault):
    argument, where, kwargs = fault
    tokenizer = BertTokenizer(VOCAB)
    if where == "init":
        refused(lambda: SentenceEncoder(models["eager"], tokenizer, **kwargs), argument)
    else:
        encoder = SentenceEncoder(models["eager"], tokenizer)
        kwargs.setdefault("sentences", ["w1"])
        refused(lambda: encoder.encode(**kwargs), argument)


SIMILARITY_FAULTS = st.sampled_from([
    (None, np.zeros((2, 8)), "embeddings1"), ("a", np.zeros((2, 8)), "embeddings1"),
    (np.zeros((2, 8)), np.zeros((2, 3, 8)), "embeddings2"),
    (np.zeros((2, 8)), np.zeros((3, 16)), "dimensions"),
    ([np.zeros(8), np.zeros(9)], np.zeros((2, 8)), "embeddings1"),
    (np.zeros((2, 8)), [["a"] * 8], "embeddings2"),
    (torch.zeros(2, 8, dtype=torch.complex64), torch.zeros(2, 8), "embeddings1")])


@FUZZ
@given(fault=SIMILARITY_FAULTS, function=st.sampled_from(["cosine", "dot", "euclidean", "manhattan"]))
def test_similarity_refuses_what_are_not_two_sets_of_vectors_of_one_size(models, fault, function):
    a, b, word = fault
    encoder = SentenceEncoder(models["eager"], BertTokenizer(VOCAB), similarity_fn_name=function)
    refused(lambda: encoder.similarity(a, b), word)


def test_encode_of_nothing_is_an_empty_matrix(models):
    encoder = SentenceEncoder(models["eager"], BertTokenizer(VOCAB), truncate_dim=8)
    assert encoder.encode([]).shape == (0, 8)


def snapshot(directory: Path) -> dict | None:
    """Every file under a folder, by relative path, with its bytes (None: the folder does not exist)."""
    if not directory.exists():
        return None
    return {str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
            for p in directory.rglob("*")}


@pytest.mark.parametrize("target", ["absent", "empty folder", "a saved model", "a file"])
def test_a_refused_save_leaves_the_target_as_it_was(tmp_path, models, model_dir, target):
    """pooling="pooler" has no sentence-transformers Pooling mode: refused before the first byte, so no
    folder is left that would read back with mean pooling; saving onto a file is refused the same way."""
    path = tmp_path / "out"
    if target == "empty folder":
        path.mkdir()
    elif target == "a saved model":
        shutil.copytree(model_dir, path)
    elif target == "a file":
        path.write_text("not a folder")
    before = snapshot(path) if path.is_dir() else path.exists() and path.read_bytes()
    encoder = SentenceEncoder(models["eager"], BertTokenizer(VOCAB), pooling="pooler")
    refused(lambda: encoder.save(path), "pooler")
    assert (snapshot(path) if path.is_dir() else path.exists() and path.read_bytes()) == before
    if target == "a file":
        mean = SentenceEncoder(models["eager"], BertTokenizer(VOCAB))
        refused(lambda: mean.save(path), "file")
        refused(lambda: models["eager"].save_pretrained(path / "inside"), "file")
        assert path.read_text() == "not a folder"


@pytest.mark.slow  # 6-15 s, nearly all of it importing sentence-transformers
def test_truncate_dim_travels_both_ways_with_sentence_transformers(tmp_path, models):
    """A folder sentence-transformers saved with truncate_dim gives vectors of that size here, as there;
    ours writes it where sentence-transformers reads it; the vectors agree (tolerance 1e-5)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    ours = SentenceEncoder(models["eager"], BertTokenizer(VOCAB), truncate_dim=12)
    ours.save(tmp_path / "ours")
    theirs = sentence_transformers.SentenceTransformer(str(tmp_path / "ours"), device="cpu")
    assert theirs.truncate_dim == 12
    sentences = ["w1 w2 w3", "w4"]
    expected = theirs.encode(sentences)
    assert expected.shape == (2, 12)
    np.testing.assert_allclose(ours.encode(sentences), expected, atol=1e-5)
    theirs.truncate_dim = 7
    theirs.save(str(tmp_path / "theirs"))
    loaded = SentenceEncoder(tmp_path / "theirs", device="cpu")
    assert loaded.truncate_dim == 7 and loaded.get_sentence_embedding_dimension() == 7
    np.testing.assert_allclose(loaded.encode(sentences), theirs.encode(sentences), atol=1e-5)
    # The argument wins over the folder's, as in sentence-transformers; encode's wins over both.
    argument_wins = SentenceEncoder(tmp_path / "theirs", device="cpu", truncate_dim=5)
    assert argument_wins.encode(sentences).shape == (2, 5)
    assert loaded.encode(sentences, truncate_dim=3).shape == (2, 3)


# ----- AdamW --------------------------------------------------------------------------------------------

BAD_NUMBERS = st.sampled_from([-1, -1e-9, math.nan, math.inf, -math.inf, "1e-3", None, True, [1e-3], 1j])


@FUZZ
@given(argument=st.sampled_from(["lr", "eps", "weight_decay", "betas"]), value=BAD_NUMBERS,
       in_group=st.booleans())
def test_a_wrong_adamw_hyperparameter_is_refused_naming_it(argument, value, in_group):
    if argument == "betas":
        value = (0.9, value)
    params = [torch.nn.Parameter(torch.zeros(3))]
    if in_group:
        refused(lambda: AdamW([{"params": params, argument: value}]), argument)
    else:
        refused(lambda: AdamW(params, **{argument: value}), argument)


@FUZZ
@given(params=st.sampled_from([
    lambda: [], lambda: [torch.zeros(3, requires_grad=True) * 2], lambda: [torch.zeros(3, dtype=torch.long)],
    lambda: (lambda p: [p, p])(torch.nn.Parameter(torch.zeros(3))), lambda: [None], lambda: [{"lr": 1e-3}],
    lambda: torch.nn.Parameter(torch.zeros(3)), lambda: [{"params": []}]]))
def test_a_wrong_parameter_list_is_refused_naming_it(params):
    refused(lambda: AdamW(params()), "param")


def test_numpy_numbers_are_hyperparameters_as_in_torch_optim():
    optimizer = AdamW([torch.nn.Parameter(torch.zeros(3))], lr=np.float32(1e-3), weight_decay=np.float64(0.0))
    assert optimizer.param_groups[0]["lr"] == np.float32(1e-3)


# ----- LoRA adapters ------------------------------------------------------------------------------------

ADAPTER_FIELDS = ["r", "lora_alpha", "lora_dropout", "target_modules", "peft_type"]


@FUZZ
@given(field=st.sampled_from(ADAPTER_FIELDS), value=st.one_of(WRONG_VALUES, st.just(KeyError)),
       weights_fault=st.sampled_from([None, "empty", "binary", "a folder", "truncated"]))
def test_a_refused_adapter_names_its_file_and_leaves_the_model_as_it_was(tmp_path_factory, models, field,
                                                                         value, weights_fault):
    """load_adapter checks adapter_config.json's fields and the weights' keys and shapes before it puts a
    single adapter on the model: refused, the model has no adapter and the same weights."""
    from minbert.lora import LoRALinear, apply_lora
    from minbert.loading.adapter_files import load_adapter, save_adapter
    adapted = BertModel(CONFIG)
    apply_lora(adapted, r=4)
    folder = tmp_path_factory.mktemp("adapter")
    save_adapter(adapted, folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    if value is KeyError:
        config.pop(field)
    else:
        config[field] = value
    (folder / "adapter_config.json").write_text(json.dumps(config))
    if weights_fault is not None:
        spoil(folder / "adapter_model.safetensors", weights_fault, 0.5)
    model = BertModel(CONFIG)
    before = {key: tensor.clone() for key, tensor in model.state_dict().items()}
    try:
        load_adapter(model, folder)
    except REFUSALS as error:
        assert names(error, "adapter_"), error  # adapter_config.json or adapter_model.safetensors
        assert not any(isinstance(m, LoRALinear) for m in model.modules())
        assert model.state_dict().keys() == before.keys()
        assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
        return
    # Accepted: a value that means what the saved one meant (r 4, a positive alpha, dropout in [0, 1)).
    assert weights_fault is None, weights_fault
    assert (field, value) in [("r", 4)] or field in ("lora_alpha", "lora_dropout") and value is not KeyError \
        or field == "lora_dropout", (field, value)

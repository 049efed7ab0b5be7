"""SentenceEncoder against sentence-transformers, both ways, on the same folders.

The reference is the installed sentence-transformers (and transformers for a plain checkpoint): what we save
it loads, what it saves we load, and the vectors, similarities, token embeddings, truncated and prompted
vectors agree to 1e-6 (float32). The tiny model has the real vocabulary (tiny_model_dir), so these run
without the embedded checkpoint's weights; the embedded all-MiniLM-L6-v2 is used where its own files matter.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from minbert import BertModel, BertTokenizer, SentenceEncoder

sentence_transformers = pytest.importorskip("sentence_transformers")

SENTENCES = ["A man is playing a guitar.", "Someone plays an instrument!", "naïve café, Ünïcödé", "x",
             "The long one: " + "many words repeat here " * 20]
ATOL = 1e-6


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def st_model(path) -> "sentence_transformers.SentenceTransformer":
    return sentence_transformers.SentenceTransformer(str(path), device="cpu")


def assert_same_vectors(ours: SentenceEncoder, theirs, sentences=SENTENCES, **kwargs) -> None:
    got = ours.encode(sentences, batch_size=2, **kwargs)
    expected = theirs.encode(sentences, batch_size=2, convert_to_numpy=True, **kwargs)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() < ATOL


@pytest.mark.parametrize("pooling, normalize", [("mean", True), ("cls", False), ("max", True)])
def test_what_we_save_sentence_transformers_loads_with_the_same_settings(tmp_path, tiny_model_dir, pooling,
                                                                         normalize):
    ours = SentenceEncoder(tiny_model_dir, pooling=pooling, normalize=normalize, max_seq_length=20,
                           similarity_fn_name="dot", device="cpu")
    ours.save(tmp_path)
    theirs = st_model(tmp_path)
    assert theirs.max_seq_length == 20 and theirs.similarity_fn_name == "dot"
    assert_same_vectors(ours, theirs)
    again = SentenceEncoder(tmp_path, device="cpu")  # and we load it back with every setting
    assert (again.pooling, again.normalize, again.max_seq_length, again.similarity_fn_name) == (
        pooling, normalize, 20, "dot")


@pytest.mark.checkpoint
def test_what_sentence_transformers_saves_we_load(tmp_path, embedded_model_dir):
    theirs = st_model(embedded_model_dir)
    theirs.save(str(tmp_path))  # sentence-transformers 6's layout: tokenizer.json, no vocab.txt
    ours = SentenceEncoder(tmp_path, device="cpu")
    assert (ours.pooling, ours.normalize, ours.max_seq_length) == ("mean", True, theirs.max_seq_length)
    assert_same_vectors(ours, theirs)


def test_a_sentence_transformers_model_built_from_modules_loads_with_its_modules(tmp_path, tiny_model_dir):
    modules = sentence_transformers.models
    transformer = modules.Transformer(str(tiny_model_dir), max_seq_length=24)
    pooling = modules.Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    theirs = sentence_transformers.SentenceTransformer(modules=[transformer, pooling], device="cpu",
                                                       similarity_fn_name="manhattan")
    theirs.save(str(tmp_path))
    ours = SentenceEncoder(tmp_path, device="cpu")
    assert (ours.pooling, ours.normalize, ours.max_seq_length, ours.similarity_fn_name) == (
        "cls", False, 24, "manhattan")
    assert_same_vectors(ours, theirs)


def test_a_transformers_folder_gives_sentence_transformers_plain_defaults(tmp_path, tiny_model_dir):
    transformers = pytest.importorskip("transformers")
    transformers.AutoModel.from_pretrained(tiny_model_dir).save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path)
    ours = SentenceEncoder(tmp_path, device="cpu")
    theirs = st_model(tmp_path)  # a plain checkpoint: sentence-transformers adds mean pooling
    assert (ours.pooling, ours.normalize) == ("mean", False)
    assert_same_vectors(ours, theirs)


def test_the_settings_travel_with_the_model_whatever_it_is_built_from(tmp_path, tiny_model_dir):
    saved = SentenceEncoder(tiny_model_dir, pooling="max", normalize=True, max_seq_length=16, device="cpu")
    saved.save(tmp_path)
    expected = saved.encode(SENTENCES)
    built = [SentenceEncoder(tmp_path, device="cpu"),
             SentenceEncoder(BertModel.from_pretrained(tmp_path), BertTokenizer.from_pretrained(tmp_path))]
    for encoder in built:
        assert (encoder.pooling, encoder.normalize, encoder.max_seq_length) == ("max", True, 16)
        assert np.abs(encoder.encode(SENTENCES) - expected).max() < ATOL
    # A model built in memory has no folder: sentence-transformers' plain defaults, as documented.
    fresh = SentenceEncoder(BertModel(saved.model.config), saved.tokenizer)
    assert (fresh.pooling, fresh.normalize) == ("mean", False)


def test_similarity_token_embeddings_truncation_and_prompts_equal_sentence_transformers(tmp_path,
                                                                                       tiny_model_dir):
    ours = SentenceEncoder(tiny_model_dir, normalize=True, device="cpu",
                           prompts={"query": "query: ", "document": ""}, default_prompt_name="query")
    ours.save(tmp_path)
    theirs = st_model(tmp_path)
    assert theirs.prompts == {"query": "query: ", "document": ""} and theirs.default_prompt_name == "query"
    assert_same_vectors(ours, theirs)  # the default prompt, on both sides
    assert_same_vectors(ours, theirs, prompt_name="document")
    assert_same_vectors(ours, theirs, prompt="passage: ", truncate_dim=8)
    assert_same_vectors(ours, theirs, truncate_dim=8, normalize_embeddings=True)

    a, b = ours.encode(SENTENCES[:3]), ours.encode(SENTENCES[2:])
    for name in ("cosine", "dot", "euclidean", "manhattan"):
        ours.similarity_fn_name = theirs.similarity_fn_name = name
        torch.testing.assert_close(ours.similarity(a, b), theirs.similarity(a, b), atol=ATOL, rtol=1e-5)
    assert ours.similarity(a[0], b).shape == (1, 3)

    got = ours.encode(SENTENCES, output_value="token_embeddings", prompt_name="document")
    expected = theirs.encode(SENTENCES, output_value="token_embeddings", prompt_name="document")
    assert [g.shape for g in got] == [e.shape for e in expected]
    assert max((g - e).abs().max().item() for g, e in zip(got, expected)) < ATOL
    assert ours.get_sentence_embedding_dimension() == theirs.get_embedding_dimension() == 32


@pytest.mark.parametrize("precision", ["float32", "int8", "uint8", "binary", "ubinary"])
def test_quantized_embeddings_follow_sentence_transformers_rules(tiny_model_dir, precision):
    """The ranges come from the vectors encoded together, as sentence-transformers' quantize_embeddings takes
    them without calibration: on our own float vectors its output is ours, value for value and dtype."""
    from sentence_transformers.util import quantize_embeddings

    ours, theirs = SentenceEncoder(tiny_model_dir, device="cpu"), st_model(tiny_model_dir)
    vectors = ours.encode(SENTENCES)
    got = ours.encode(SENTENCES, precision=precision)
    expected = quantize_embeddings(vectors, precision=precision)
    assert got.dtype == expected.dtype == theirs.encode(SENTENCES, precision=precision).dtype
    assert np.array_equal(got, expected)
    as_tensor = ours.encode(SENTENCES, precision=precision, convert_to_tensor=True)
    reference = theirs.encode(SENTENCES, precision=precision, convert_to_tensor=True)
    assert as_tensor.dtype == reference.dtype and as_tensor.shape == reference.shape
    listed = ours.encode(SENTENCES, precision=precision, convert_to_numpy=False)
    assert isinstance(listed, list) and torch.equal(torch.stack(listed), torch.from_numpy(expected))
    if precision.endswith("int8"):
        with pytest.raises(ValueError, match="one embedding has none"):
            ours.encode(SENTENCES[0], precision=precision)
    if precision != "float32":
        with pytest.raises(ValueError, match=f"precision='{precision}' quantizes sentence embeddings"):
            ours.encode(SENTENCES, precision=precision, output_value="token_embeddings")
    with pytest.raises(ValueError, match="precision must be one of"):
        ours.encode(SENTENCES, precision="int4")


def test_pairwise_similarity_query_and_document_prompts_and_dtypes_equal_sentence_transformers(
        tmp_path, tiny_model_dir):
    SentenceEncoder(tiny_model_dir, device="cpu", prompts={"query": "query: ", "passage": "passage: "},
                    default_prompt_name="passage").save(tmp_path)
    ours, theirs = SentenceEncoder(tmp_path, device="cpu"), st_model(tmp_path)
    assert ours.prompts == theirs.prompts == {"query": "query: ", "document": "", "passage": "passage: "}
    for method in ("encode_query", "encode_document"):  # document is "" (ST 6's default), not passage
        for kwargs in ({}, {"prompt": "x: "}, {"prompt_name": "passage"}):
            got = getattr(ours, method)(SENTENCES, **kwargs)
            assert np.abs(got - getattr(theirs, method)(SENTENCES, **kwargs)).max() < ATOL, (method, kwargs)
    a, b = ours.encode(SENTENCES[:3]), ours.encode(SENTENCES[2:])
    for name in ("cosine", "dot", "euclidean", "manhattan"):
        ours.similarity_fn_name = theirs.similarity_fn_name = name
        torch.testing.assert_close(ours.similarity_pairwise(a, b), theirs.similarity_pairwise(a, b),
                                   atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="pair by pair"):
        ours.similarity_pairwise(a, b[:2])
    for cast in ("half", "bfloat16"):  # the model's dtype, bfloat16 as float32 arrays (numpy has none)
        getattr(ours, cast)(), getattr(theirs, cast)()
        assert ours.encode(SENTENCES).dtype == theirs.encode(SENTENCES).dtype
        got = ours.encode(SENTENCES, convert_to_tensor=True)
        assert got.dtype == theirs.encode(SENTENCES, convert_to_tensor=True).dtype == getattr(torch, {
            "half": "float16", "bfloat16": "bfloat16"}[cast])


def test_the_unpadded_model_encodes_on_a_cpu_as_sdpa_does_to_1e_6(tiny_model_dir):
    """attn_implementation="auto" is the unpadded model on a CPU: the same vectors as BertModel's sdpa
    kernel (the tolerance docs/results.md states), in batches sorted by tokens."""
    fast, plain = (SentenceEncoder(tiny_model_dir, device="cpu", attn_implementation=kernel)
                   for kernel in ("auto", "sdpa"))
    assert type(fast.model).__name__ == "UnpaddedBertModel" and type(plain.model) is BertModel
    many = SENTENCES * 7
    for batch_size in (1, 4, 32):
        assert np.abs(fast.encode(many, batch_size=batch_size) - plain.encode(many)).max() < ATOL


def test_save_writes_a_model_card_from_what_is_saved_and_the_versions_that_wrote_it(tmp_path, tiny_model_dir):
    ours = SentenceEncoder(tiny_model_dir, device="cpu", normalize=True, max_seq_length=48,
                           prompts={"query": "query: "})
    ours.save(tmp_path)
    card = (tmp_path / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: sentence-transformers\npipeline_tag: sentence-similarity\n")
    for fact in ("32-dimensional\nvector", "2 layers, hidden size 32, 4 heads", "Maximum sequence length: 48",
                 "Pooling: mean, normalized to unit length", "Similarity function: cosine",
                 "Prompts: query = 'query: '", 'SentenceTransformer("path/to/this/folder")'):
        assert fact in card, fact
    versions = json.loads((tmp_path / "config_sentence_transformers.json").read_text())["__version__"]
    assert versions == {"minbert": versions["minbert"], "pytorch": torch.__version__}
    assert st_model(tmp_path).model_card_data is not None  # sentence-transformers reads it, card and all


def test_a_prompt_left_out_of_the_pooling_as_the_pooling_config_says(tmp_path, tiny_model_dir):
    SentenceEncoder(tiny_model_dir, device="cpu").save(tmp_path)
    pooling_file = tmp_path / "1_Pooling" / "config.json"
    pooling_file.write_text(json.dumps({**json.loads(pooling_file.read_text()), "include_prompt": False}))
    ours, theirs = SentenceEncoder(tmp_path, device="cpu"), st_model(tmp_path)
    assert_same_vectors(ours, theirs, prompt="query: ")
    assert np.abs(ours.encode(SENTENCES, prompt="query: ") - ours.encode(SENTENCES)).max() > 1e-3


def test_it_is_a_module_that_moves_and_changes_precision(tiny_model_dir):
    encoder = SentenceEncoder(tiny_model_dir, device="cpu")
    assert isinstance(encoder, torch.nn.Module) and encoder.device == torch.device("cpu")
    assert sum(p.numel() for p in encoder.parameters()) == sum(p.numel() for p in encoder.model.parameters())
    full = encoder.encode(SENTENCES)
    encoder.to(torch.float64).eval()
    assert encoder.model.embeddings.word_embeddings.weight.dtype == torch.float64
    assert np.abs(encoder.encode(SENTENCES) - full).max() < 1e-5
    features = encoder.tokenize(SENTENCES[:2])
    out = encoder(features)  # sentence-transformers' forward: the features plus the two outputs
    assert out["sentence_embedding"].shape == (2, 32)
    assert out["token_embeddings"].shape == (*features["input_ids"].shape, 32)
    encoder.max_seq_length = 8
    assert encoder.tokenize(SENTENCES)["input_ids"].shape[1] == 8
    with pytest.raises(ValueError, match="max_seq_length must be"):
        encoder.max_seq_length = 1000


def test_a_main_job_runs_best_folder_says_how_the_job_pooled(tmp_path, tiny_multitask_run):
    from tasks import multitask

    out = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(out, "--max-steps", "0")) == 0
    ours = SentenceEncoder(out / "best", device="cpu")  # the README's `SentenceEncoder(f"{run}/best")`
    assert (ours.pooling, ours.normalize, ours.max_seq_length) == ("mean", True, 64)
    assert_same_vectors(ours, st_model(out / "best"))


# ----- sentence-transformers' files: an allow-list of what SentenceEncoder implements --------------------


def test_a_folder_sentence_transformers_saved_loads_with_its_own_settings(tmp_path, tiny_model_dir):
    """sentence-transformers 6 writes transformer_task, modality_config and module_output_name beside the
    pooling: each holds the value whose meaning SentenceEncoder implements, so the folder loads, equal."""
    theirs = st_model(tiny_model_dir)
    theirs.save(str(tmp_path))
    assert "modality_config" in json.loads((tmp_path / "sentence_bert_config.json").read_text())
    assert_same_vectors(SentenceEncoder(tmp_path, device="cpu"), theirs)


def spoil_field(folder, file: str, field: str, value) -> None:
    path = folder / file
    values = json.loads(path.read_text())
    if isinstance(values, list):
        values[-1][field] = value
    else:
        values[field] = value
    path.write_text(json.dumps(values))


@pytest.mark.parametrize("file, field, value", [
    ("modules.json", "type", "sentence_transformers.models.Dense"),
    ("modules.json", "kwargs", ["task"]),
    ("modules.json", "idx", "one"),
    ("sentence_bert_config.json", "max_seq_length", 0),
    ("sentence_bert_config.json", "do_lower_case", "yes"),
    ("sentence_bert_config.json", "transformer_task", "text-generation"),
    ("sentence_bert_config.json", "module_output_name", "sentence_embedding"),
    ("sentence_bert_config.json", "query_length", 32),
    ("sentence_bert_config.json", "tokenizer_args", {"do_lower_case": True}),
    ("1_Pooling/config.json", "include_prompt", "no"),
    ("1_Pooling/config.json", "pooling_mode_mean_tokens", 1),
    ("1_Pooling/config.json", "normalize", True),
    ("config_sentence_transformers.json", "model_type", "SparseEncoder"),
    ("config_sentence_transformers.json", "similarity_fn_name", "maxsim"),
    ("config_sentence_transformers.json", "prompts", "query: "),
    ("config_sentence_transformers.json", "truncate_dim", -4),
])
def test_a_field_we_do_not_implement_or_of_the_wrong_type_is_refused_naming_file_field_and_value(
        tmp_path, tiny_model_dir, file, field, value):
    SentenceEncoder(tiny_model_dir, normalize=True, device="cpu").save(tmp_path)
    spoil_field(tmp_path, file, field, value)
    with pytest.raises(ValueError) as error:
        SentenceEncoder(tmp_path, device="cpu")
    message = str(error.value)
    assert str(tmp_path / file) in message and field in message.replace("Dense", "type Dense"), message
    assert json.dumps(value) in message or repr(value) in message or str(value) in message, message


def test_pooling_modes_we_do_not_implement_are_named_with_their_field(tmp_path, tiny_model_dir):
    SentenceEncoder(tiny_model_dir, device="cpu").save(tmp_path)
    spoil_field(tmp_path, "1_Pooling/config.json", "pooling_mode_weightedmean_tokens", True)
    spoil_field(tmp_path, "1_Pooling/config.json", "pooling_mode_mean_tokens", False)
    with pytest.raises(ValueError, match="got 'weightedmean' .*1_Pooling/config.json, field pooling_mode"):
        SentenceEncoder(tmp_path, device="cpu")

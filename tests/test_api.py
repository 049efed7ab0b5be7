"""The public API: names at the package root, from_pretrained / save_pretrained, the tokenizer call,
SentenceEncoder, and the README's example (run as written, so it cannot rot).

References we did not write: `transformers`' tokenizer call (the keys and values a `transformers` user gets
for the same vocabulary and arguments) and sentence-transformers' SentenceTransformer.encode (the
embeddings of all-MiniLM-L6-v2, to 1e-5). The pooling choices are checked against minbert.pooling's
functions, which tests/graded/ checks by hand; everything else is a property (order, batch size,
unit norms) on a tiny random model with a 34-token vocabulary, so those tests need no checkpoint.
"""

from __future__ import annotations

import contextlib
import ast
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import minbert
from minbert import BertConfig, BertForPreTraining, BertModel, BertTokenizer, SentenceEncoder
from minbert.fast.unpadded import UnpaddedBertModel
from minbert.loading.checkpoint import CheckpointError, LoadReport
from minbert.loading.hub import ModelNotFoundError
from minbert.pooling import max_pool, mean_pool
from minbert.text.inputs import ModelInputs

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the a cat dog sat ran on mat today is was very happy sad . , ! ? and of to in it he she "
         "##s ##ed ##ing play").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
SENTENCES = ["the cat sat on the mat .", "a dog", "she is very happy today , and he is sad !",
             "it ran", "the dog played in the mat and the cat sat on it .", "happy"]
TOL = dict(atol=1e-6, rtol=1e-5)  # float32; the same inputs in batches of other shapes


@pytest.fixture(scope="module")
def tok() -> BertTokenizer:
    return BertTokenizer(VOCAB, model_max_length=64)


@pytest.fixture(scope="module")
def model() -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny()).eval()


def heads_files(directory: Path) -> None:
    """What a fine-tuning run writes beside the encoder in best/ (the task heads); not ours to read."""
    save_file({"sst.weight": torch.zeros(5, 32)}, str(directory / "heads.safetensors"))
    (directory / "heads.json").write_text(json.dumps({"tasks": ["sst"]}))


# ----- the package root -------------------------------------------------------------------------------


def test_public_names_come_from_the_package_root():
    from minbert import config, heads, model, sentence_encoder
    from minbert.loading import checkpoint
    from minbert.text import tokenizer

    # no fast path among them (UnpaddedBertModel comes from minbert/fast/unpadded.py): the handout leaves
    # those out, and its package root must import
    assert sorted(minbert.__all__) == sorted(["BertConfig", "BertTokenizer", "BertModel",
                                              "BertForPreTraining", "SentenceEncoder", "MinbertError",
                                              "FileContentError", "ConfigError", "CheckpointError",
                                              "FileAccessError", "ModelNotFoundError", "DeviceError"])
    assert all(issubclass(getattr(minbert, name), minbert.MinbertError) for name in minbert.__all__
               if name.endswith("Error"))
    assert (BertConfig, BertTokenizer, BertModel, BertForPreTraining, SentenceEncoder) == (
        config.BertConfig, tokenizer.BertTokenizer, model.BertModel, heads.BertForPreTraining,
        sentence_encoder.SentenceEncoder)
    assert checkpoint.LoadReport is LoadReport
    with pytest.raises(AttributeError, match="no attribute 'BertModle'"):
        minbert.BertModle


@pytest.mark.slow
def test_importing_minbert_loads_only_what_is_asked_for():
    """`import minbert` runs no model file; `from minbert import BertModel` runs the lesson and loading, not
    the tokenizer, the fast paths or sentence-transformers' files."""
    code = ("import sys, minbert; print(sorted(m for m in sys.modules if m.startswith('minbert')));"
            "from minbert import BertModel; print(sorted(m for m in sys.modules if m.startswith('minbert')))")
    lines = subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True,
                           text=True).stdout.splitlines()
    assert lines[0] == "['minbert']"
    loaded = set(ast.literal_eval(lines[1]))
    assert {"minbert.model", "minbert.attention", "minbert.loading.pretrained"} <= loaded
    assert not loaded & {"minbert.text.tokenizer", "minbert.fast.unpadded", "minbert.fast.dropout",
                         "minbert.sentence_encoder", "minbert.loading.sentence_files", "minbert.heads"}


@pytest.mark.slow
def test_importing_minbert_does_not_import_transformers():
    # A fresh process: this one imported transformers for the references.
    code = "import sys, minbert; assert 'transformers' not in sys.modules, 'minbert imported transformers'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ----- from_pretrained / save_pretrained -------------------------------------------------------------


@pytest.mark.parametrize("cls", [BertModel, UnpaddedBertModel, BertForPreTraining])
def test_save_pretrained_then_from_pretrained_gives_equal_outputs_and_the_report(tmp_path, cls):
    ours = cls(BertConfig.tiny()).eval()
    assert ours.load_report is None  # built, not loaded
    written = ours.save_pretrained(tmp_path)
    assert written == tmp_path
    assert {"config.json", "model.safetensors"} <= {p.name for p in tmp_path.iterdir()}

    loaded = cls.from_pretrained(tmp_path)
    assert type(loaded) is cls and not loaded.training
    assert isinstance(loaded.load_report, LoadReport) and loaded.load_report.exact
    again, report = cls.from_pretrained(str(tmp_path), return_report=True)
    assert isinstance(again, cls) and report is again.load_report
    assert str(report) == str(loaded.load_report)

    ids = torch.randint(5, 99, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    first, second = ours(ids, mask), loaded(ids, mask)
    # the keys: an output iterates as a dict does (minbert/loading/pretrained.py)
    assert list(first) == list(second)
    for key in first:
        assert torch.equal(first[key], second[key]), key


def test_from_pretrained_warns_about_fresh_heads_at_the_callers_line_and_reports_them(tmp_path):
    BertModel(BertConfig.tiny()).save_pretrained(tmp_path)  # an encoder: no pre-training heads
    with pytest.warns(UserWarning, match="freshly initialised") as warned:
        model, report = BertForPreTraining.from_pretrained(tmp_path, return_report=True)
    assert warned[0].filename == __file__
    assert model.load_report is report and report.initialised
    assert all(key.startswith("cls.") for key in report.initialised)


def test_from_pretrained_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(ModelNotFoundError, match="nowhere"):
        BertModel.from_pretrained(tmp_path / "nowhere")
    BertModel(BertConfig.tiny()).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(BertConfig.tiny(hidden_size=36).to_dict()))
    with pytest.raises(CheckpointError, match="shape mismatch"):
        BertModel.from_pretrained(tmp_path)


@pytest.mark.checkpoint
def test_default_model_and_tokenizer_by_name(embedded_model_dir):
    model = BertModel.from_pretrained()
    assert model.config.hidden_size == 384 and model.load_report.weights_file.parent == embedded_model_dir
    by_dir = BertTokenizer.from_pretrained(embedded_model_dir)
    for name in (None, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        assert BertTokenizer.from_pretrained(name).encode("Hello World!") == by_dir.encode("Hello World!")


def test_tokenizer_from_an_unknown_name_says_a_vocab_directory_works_too(tmp_path):
    with pytest.raises(ModelNotFoundError, match="any directory holding vocab.txt"):
        BertTokenizer.from_pretrained(tmp_path / "nowhere")


def test_tokenizer_save_pretrained_is_save(tmp_path, tok):
    tok.save_pretrained(tmp_path)
    loaded = BertTokenizer.from_pretrained(tmp_path)
    assert loaded.convert_ids_to_tokens(range(loaded.vocab_size)) == VOCAB
    assert loaded.model_max_length == 64


# ----- the tokenizer call ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tok, tmp_path_factory):
    """`transformers`' `tokenizers`-backed BertTokenizerFast (transformers 5's BertTokenizer), same files.

    The fast one, not the pure-Python one: a pair's "longest_first" is the `tokenizers` rule, which ours
    follows (truncation.py); the pure-Python one gives the odd piece of an odd budget to A when B is at
    least as long.
    """
    from transformers import BertTokenizerFast
    return BertTokenizerFast.from_pretrained(str(tok.save(tmp_path_factory.mktemp("vocab"))))


def assert_same_inputs(ours, theirs) -> None:
    assert list(ours) == ["input_ids", "token_type_ids", "attention_mask"] and set(theirs) == set(ours)
    for key, value in ours.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, theirs[key]), key
        else:
            assert value == theirs[key], key


@pytest.mark.parametrize("kwargs", [
    {},
    {"max_length": 6},
    {"padding": "max_length", "max_length": 20},
    {"return_tensors": None},
    {"padding": False, "return_tensors": None},
    {"padding": False, "return_tensors": None, "max_length": 5},
], ids=str)
def test_tokenizer_call_equals_transformers(tok, reference, kwargs):
    options = {"padding": True, "truncation": True, "return_tensors": "pt", "return_token_type_ids": True,
               **kwargs}
    # A batch, a batch of pairs, one text (a batch of one, or flat lists), one pair.
    for args in ([SENTENCES], [SENTENCES, SENTENCES[::-1]], [SENTENCES[0]], ["a dog", "the cat"]):
        assert_same_inputs(tok(*args, **kwargs), reference(*args, **options))


def test_tokenizer_call_is_batch_encode_and_feeds_the_model(tok, model):
    inputs = tok(SENTENCES, SENTENCES[::-1], max_length=12)
    expected = tok.batch_encode(SENTENCES, SENTENCES[::-1], max_length=12)
    assert isinstance(inputs, dict) and isinstance(inputs, ModelInputs)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(inputs[key], getattr(expected, key)) and inputs[key] is getattr(inputs, key)
    moved = inputs.to("cpu")
    assert isinstance(moved, ModelInputs) and torch.equal(moved.input_ids, inputs.input_ids)
    assert torch.equal(model(**inputs).last_hidden_state, model(**expected._asdict()).last_hidden_state)


def test_tokenizer_call_padding_and_truncation_choices(tok):
    one = tok(["a dog", "the cat"], padding=False)  # equal lengths make a tensor without padding
    assert one.input_ids.shape == (2, 4)
    assert tok(["a dog", "the cat sat"], padding=False, return_tensors=None).input_ids == [
        tok.encode("a dog"), tok.encode("the cat sat")]
    assert tok("a dog", return_tensors=None) == dict(tok.encode_example("a dog")._asdict())
    assert tok(SENTENCES, truncation="tail", max_length=5).input_ids.tolist() == tok.batch_encode(
        SENTENCES, truncation="tail", max_length=5).input_ids.tolist()
    assert tok(SENTENCES, truncation=False).input_ids.shape[1] == max(len(tok.encode(s))
                                                                      for s in SENTENCES)
    assert tok([]).input_ids.shape == (0, 0)


def test_tokenizer_call_errors_name_the_argument(tok):
    cases = [
        (TypeError, r"text\[1\] must be a str, got int", lambda: tok(["ok", 3])),
        (TypeError, "text must be a list of str, got int", lambda: tok(42)),
        (ValueError, "text_pair has 1 items but text has 2", lambda: tok(["a", "b"], ["c"])),
        (TypeError, r"text_pair\[0\] must be a str, got NoneType", lambda: tok(["a"], [None])),
        (TypeError, "text_pair must be a str when text is a str, got list", lambda: tok("a", ["b"])),
        (TypeError, "text_pair must be a list of str, one per text, got a single str",
         lambda: tok(["a"], "b")),
        (ValueError, "padding must be True, False, 'longest'", lambda: tok(["a"], padding="left")),
        (ValueError, r"truncation must be True, False, 'do_not_truncate' or one of .*'middle'",
         lambda: tok(["a"], truncation="middle")),
        (ValueError, "return_tensors must be 'pt'", lambda: tok(["a"], return_tensors="tf")),
        (TypeError, "max_length must be an int", lambda: tok(["a"], max_length=5.0)),
        (ValueError, "padding=False left examples of 3 to 4 tokens",
         lambda: tok(["a", "a dog"], padding=False)),
        (ValueError, r"text\[1\] with text_pair\[1\] is 9 tokens, more than max_length=8",
         lambda: tok(["a", "the cat sat"], ["b", "on the mat"], truncation=False, max_length=8)),
        (TypeError, "input_ids is a list, not a tensor", lambda: tok(["a"], return_tensors=None).to("cpu")),
        (AttributeError, "ModelInputs has no 'labels'", lambda: tok(["a"]).labels),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


# ----- SentenceEncoder on a tiny model ----------------------------------------------------------------


@pytest.fixture(scope="module")
def encoder(model, tok) -> SentenceEncoder:
    return SentenceEncoder(model, tok)


def test_encode_restores_the_input_order_after_sorting_by_length(encoder):
    together = encoder.encode(SENTENCES, batch_size=4)
    alone = np.stack([encoder.encode([s])[0] for s in SENTENCES])  # no padding, no sorting
    np.testing.assert_allclose(together, alone, **TOL)


def test_encode_does_not_depend_on_the_batch_size(encoder):
    reference = encoder.encode(SENTENCES, batch_size=32)
    for batch_size in (1, 2, 5):
        np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=batch_size), reference, **TOL)


def test_normalize_gives_unit_vectors_and_normalize_embeddings_adds_it_as_sentence_transformers_does(model, tok):
    raw = SentenceEncoder(model, tok).encode(SENTENCES)
    unit = SentenceEncoder(model, tok, normalize=True).encode(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), **TOL)
    np.testing.assert_allclose(SentenceEncoder(model, tok).encode(SENTENCES, normalize_embeddings=True), unit,
                               **TOL)
    # The Normalize module runs whatever the call says; normalize_embeddings=False adds nothing.
    np.testing.assert_allclose(SentenceEncoder(model, tok, normalize=True).encode(
        SENTENCES, normalize_embeddings=False), unit, **TOL)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)


@pytest.mark.parametrize("how", ["mean", "cls", "max", "pooler"])
def test_pooling_choices_equal_minbert_pooling(model, tok, how):
    inputs = tok(SENTENCES)
    with torch.no_grad():
        output = model(**inputs)
    expected = {"mean": lambda: mean_pool(output.last_hidden_state, inputs.attention_mask),
                "max": lambda: max_pool(output.last_hidden_state, inputs.attention_mask),
                "cls": lambda: output.last_hidden_state[:, 0],
                "pooler": lambda: output.pooler_output}[how]()
    ours = SentenceEncoder(model, tok, pooling=how).encode(SENTENCES, convert_to_tensor=True)
    torch.testing.assert_close(ours, expected, **TOL)


def test_pairs_are_one_input_each(encoder, model, tok):
    pairs = [("the cat sat", "on the mat"), ("a dog", "ran")]
    inputs = tok([a for a, _ in pairs], [b for _, b in pairs])
    with torch.no_grad():
        expected = mean_pool(model(**inputs).last_hidden_state, inputs.attention_mask)
    torch.testing.assert_close(encoder.encode(pairs, convert_to_tensor=True), expected, **TOL)
    assert encoder.encode([list(p) for p in pairs]).shape == (2, 32)


def test_output_types_and_a_single_string(encoder):
    array = encoder.encode(SENTENCES)
    assert isinstance(array, np.ndarray) and array.dtype == np.float32 and array.shape == (len(SENTENCES), 32)
    tensor = encoder.encode(SENTENCES, convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor) and torch.equal(tensor, torch.from_numpy(array))
    vectors = encoder.encode(SENTENCES, convert_to_numpy=False)
    assert isinstance(vectors, list) and all(v.shape == (32,) for v in vectors)
    assert encoder.encode("the cat").shape == (32,)
    assert encoder.encode("the cat", convert_to_tensor=True).shape == (32,)
    np.testing.assert_allclose(encoder.encode("the cat"), encoder.encode(["the cat"])[0], **TOL)
    assert encoder.encode([]).shape == (0, 32) and encoder.encode([], convert_to_tensor=True).shape == (0, 32)
    assert encoder.get_sentence_embedding_dimension() == 32


def test_encode_leaves_the_training_mode_and_grads_alone(tok):
    model = BertModel(BertConfig.tiny())  # training mode, as built
    vectors = SentenceEncoder(model, tok).encode(SENTENCES * 2, batch_size=3, convert_to_tensor=True)
    assert model.training and not vectors.requires_grad
    again = SentenceEncoder(model, tok).encode(SENTENCES * 2, batch_size=5, convert_to_tensor=True)
    torch.testing.assert_close(vectors, again, **TOL)  # eval mode inside: no dropout


def test_progress_bar_only_when_asked_or_on_a_terminal(encoder, capsys):
    encoder.encode(SENTENCES, batch_size=1)  # six batches, but stderr is not a terminal here
    assert "encode" not in capsys.readouterr().err
    encoder.encode(SENTENCES, batch_size=1, show_progress_bar=True)
    assert "encode" in capsys.readouterr().err


def test_sentence_encoder_errors_name_the_argument(model, tok):
    encoder = SentenceEncoder(model, tok)
    cases = [
        (TypeError, r"sentences\[1\] must be a str or an \(a, b\) pair of str",
         lambda: encoder.encode(["a", 3])),
        (TypeError, r"sentences\[0\] must be .* got \('a', 'b', 'c'\)",
         lambda: encoder.encode([("a", "b", "c")])),
        (ValueError, "mixes single texts and", lambda: encoder.encode(["a", ("b", "c")])),
        (TypeError, "sentences must be a str, a list", lambda: encoder.encode(42)),
        (ValueError, "batch_size must be a positive int", lambda: encoder.encode(["a"], batch_size=0)),
        (ValueError, "pooling must be one of .* got 'sum'",
         lambda: SentenceEncoder(model, tok, pooling="sum")),
        (ValueError, r"max_seq_length must be .* \(64\), got 65",
         lambda: SentenceEncoder(model, tok, max_seq_length=65)),
        (ValueError, "output_value must be one of", lambda: encoder.encode(["a"], output_value="all")),
        (ValueError, "prompt_name 'passage' is not one of the prompts",  # query, document: '', as in ST 6
         lambda: encoder.encode(["a"], prompt_name="passage")),
        (ValueError, "similarity_fn_name must be one of .* got 'l2'",
         lambda: SentenceEncoder(model, tok, similarity_fn_name="l2")),
        (TypeError, "needs its tokenizer", lambda: SentenceEncoder(model)),
        (TypeError, "pass its encoder", lambda: SentenceEncoder(BertForPreTraining(BertConfig.tiny()), tok)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


# ----- model directories: sentence-transformers' files, a fine-tuned run's best/ ----------------------


def write_sentence_transformers_files(directory: Path, pooling: dict, modules=("Pooling", "Normalize"),
                                      prefix="sentence_transformers.models.") -> None:
    """modules.json and its modules' configs, as sentence-transformers saves them."""
    listed = [{"idx": 0, "name": "0", "path": "", "type": prefix + "Transformer"}]
    listed += [{"idx": i, "name": str(i), "path": f"{i}_{name}", "type": prefix + name}
               for i, name in enumerate(modules, start=1)]
    (directory / "modules.json").write_text(json.dumps(listed))
    (directory / "1_Pooling").mkdir(exist_ok=True)
    pooling = {"word_embedding_dimension": 32, **pooling}
    (directory / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (directory / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16,
                                                                     "do_lower_case": False}))


def test_a_fine_tuned_best_directory_loads_with_plain_defaults(tmp_path, model, tok):
    best = tmp_path / "best"
    model.save_pretrained(best, tokenizer=tok)
    heads_files(best)
    encoder = SentenceEncoder(best, device="cpu")
    assert (encoder.pooling, encoder.normalize, encoder.max_seq_length) == ("mean", False, 64)
    expected = SentenceEncoder(model, tok).encode(SENTENCES)
    np.testing.assert_allclose(encoder.encode(SENTENCES), expected, **TOL)


def test_sentence_transformers_settings_are_the_defaults(tmp_path, model, tok):
    model.save_pretrained(tmp_path, tokenizer=tok)
    write_sentence_transformers_files(tmp_path, {"pooling_mode_cls_token": True,
                                                 "pooling_mode_mean_tokens": False})
    encoder = SentenceEncoder(tmp_path)
    assert (encoder.pooling, encoder.normalize, encoder.max_seq_length) == ("cls", True, 16)
    assert SentenceEncoder(tmp_path, pooling="max", normalize=False, max_seq_length=20).pooling == "max"
    # Newer sentence-transformers: "pooling_mode" and the classes' new import paths.
    write_sentence_transformers_files(tmp_path, {"pooling_mode": "max"}, modules=("Pooling",),
                                      prefix="sentence_transformers.sentence_transformer.modules.pooling.")
    assert (SentenceEncoder(tmp_path).pooling, SentenceEncoder(tmp_path).normalize) == ("max", False)


def test_sentence_transformers_modules_we_cannot_run_are_errors(tmp_path, model, tok):
    model.save_pretrained(tmp_path, tokenizer=tok)
    write_sentence_transformers_files(tmp_path, {"pooling_mode": "weightedmean"})
    with pytest.raises(ValueError, match="got 'weightedmean' .*1_Pooling.*pass pooling="):
        SentenceEncoder(tmp_path)
    assert SentenceEncoder(tmp_path, pooling="mean").pooling == "mean"
    write_sentence_transformers_files(tmp_path, {"pooling_mode": "mean"}, modules=("Pooling", "Dense"))
    with pytest.raises(ValueError, match="modules.json: module '.*Dense' in 2_Dense/ is not one"):
        SentenceEncoder(tmp_path)


# ----- against sentence-transformers ---------------------------------------------------------------------


@pytest.mark.checkpoint
@pytest.mark.slow
def test_embeddings_equal_sentence_transformers_on_all_minilm(embedded_model_dir, monkeypatch):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    theirs = sentence_transformers.SentenceTransformer(str(embedded_model_dir), device="cpu")
    ours = SentenceEncoder(device="cpu")
    assert (ours.pooling, ours.normalize, ours.max_seq_length) == ("mean", True, theirs.max_seq_length)
    sentences = ["A man is playing a guitar.", "Someone plays an instrument!", "naïve café, Ünïcödé",
                 "x", "The long one: " + "many words repeat here " * 80]  # > 256 pieces: truncated alike
    pairs = [("A man is playing a guitar.", "Someone plays an instrument."), ("short", "pair " * 300)]
    for inputs in (sentences, pairs):
        expected = theirs.encode(inputs, batch_size=2, convert_to_numpy=True)
        got = ours.encode(inputs, batch_size=2)
        assert np.abs(got - expected).max() < 1e-5


# ----- the README's example ----------------------------------------------------------------------------


@pytest.mark.checkpoint
@pytest.mark.slow  # a two-step run of the embedded model: about 15 s on 2 cores
def test_every_python_block_of_the_readme_runs_as_written_and_prints_what_it_says(
        tmp_path, monkeypatch, tiny_multitask_run, embedded_model_dir):
    """Each python block of README.md runs as written where `make run` left its folder,
    runs/multitask/<date-time> (here a short run of the embedded model on the demo sample, into its default
    folder); each print's comment ends with what it prints (-> ...)."""
    from tasks import multitask

    monkeypatch.chdir(tmp_path)
    args = tiny_multitask_run(tmp_path, "--model", str(embedded_model_dir))
    assert multitask.main(args[:args.index("--out")] + args[args.index("--out") + 2:]) == 0
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)
    said = [line.rsplit(" -> ", 1)[1] for block in blocks for line in block.splitlines()
            if line.startswith("print(")]
    assert blocks and said
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {})
    assert out.getvalue().splitlines() == said

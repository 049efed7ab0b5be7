"""The tokenizer with the folders and call habits `transformers` users have.

References we did not write: `transformers`' BertTokenizerFast (transformers 5's BertTokenizer) and
sentence-transformers, each reading or writing the same folder; the `tokenizers` library's own truncation
(the Rust rule BertTokenizerFast applies) for how a pair shares its budget; and worked examples by hand.

- folders: what transformers' save_pretrained and sentence-transformers' save write (tokenizer.json, no
  vocab.txt) loads and gives transformers' ids; vocab.txt wins where both exist; a tokenizer.json that is
  not BERT's WordPiece is a ValueError naming the file and what it holds.
- the call: text= / text_pair=, (a, b) tuples, return_tensors "pt" / "np" / None, add_special_tokens,
  return_attention_mask / return_token_type_ids, len(), the *_token_id names, encode, decode, batch_decode.
- pair truncation: longest_first, only_first, only_second equal `tokenizers` on every small pair of lengths
  and budget, and BertTokenizerFast on every STS-B pair that needs cutting (shared data).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from minbert import BertConfig, BertModel
from minbert.text.tokenizer import BertTokenizer
from minbert.text.truncation import PAIR_STRATEGIES, pair_budgets

transformers = pytest.importorskip("transformers")

WORDS = ("the a cat dog sat ran on mat today is was very happy sad . , ! ? and of to in it he she "
         "##s ##ed ##ing play").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
SENTENCES = ["the cat sat on the mat .", "a dog", "she is very happy today , and he is sad !",
             "it ran", "the dog played in the mat and the cat sat on it .", "happy"]

# Accents (composed and decomposed), CJK, kana, hangul, emoji, punctuation, control characters, URLs,
# a typed special token, and a text past the 512-piece window. Left out on purpose, where transformers 5's
# tokenizer differs from Google's BERT and from ours (see tokenizer.py): U+2B820..U+2B91F, and an empty
# second text, which transformers drops as if no pair were given.
MIXED = [
    "Hello, World!", "naïve café Ångström über Müller façade", "re\u0301sume\u0301 (decomposed)",
    "İstanbul ß ﬁ Ω µ Σίσυφος", "中文字符测试 我爱北京天安门。", "ひらがな カタカナ 漢字まじり", "한국어 텍스트",
    "😀🎉👍🏽 emoji ❤️", "...!!!??? --==** «quoted» „German“ ‘single’ don't won't",
    "$100 & €50 £3 ¥ C++ C# .NET Ⅻ ① ² ½", "\x00\x07 control \x7f chars\u200b zero width \ufeff",
    "https://www.example.com/path?q=1&r=two#frag user@example.com", "Hello [MASK] world",
    "supercalifragilisticexpialidocious " + "a" * 101, "The long one: " + "many words repeat here " * 150,
]


def fast_reference(directory: Path):
    return transformers.BertTokenizerFast.from_pretrained(str(directory))


def ids_of(tokenizer: BertTokenizer, texts, pairs=None) -> list[list[int]]:
    return tokenizer(texts, pairs, padding=False, return_tensors=None)["input_ids"]


def assert_same_ids_as_transformers(ours: BertTokenizer, theirs) -> None:
    # Both cut at the folder's model_max_length (truncation=True): the long text is cut alike.
    assert ids_of(ours, MIXED) == theirs(MIXED, truncation=True)["input_ids"]
    pairs = MIXED[::-1]
    assert ids_of(ours, MIXED, pairs) == theirs(MIXED, pairs, truncation=True)["input_ids"]


# ---------------------------------------------------------------- folders


@pytest.mark.checkpoint
def test_a_folder_transformers_saved_without_vocab_txt_gives_transformers_ids(embedded_model_dir, tmp_path):
    fast_reference(embedded_model_dir).save_pretrained(str(tmp_path))
    (tmp_path / "vocab.txt").unlink(missing_ok=True)  # transformers 5 writes none; be sure the json is read
    assert (tmp_path / "tokenizer.json").is_file()
    ours = BertTokenizer.from_pretrained(tmp_path)
    assert (ours.lowercase, ours.strip_accents, ours.model_max_length) == (True, None, 512)
    assert_same_ids_as_transformers(ours, fast_reference(tmp_path))
    # The same ids as the vocab.txt beside the original tokenizer.json.
    from_vocab_txt = BertTokenizer.from_pretrained(embedded_model_dir)
    assert ids_of(ours, MIXED, MIXED[::-1]) == ids_of(from_vocab_txt, MIXED, MIXED[::-1])


@pytest.mark.checkpoint
@pytest.mark.slow
def test_a_folder_sentence_transformers_saved_gives_its_ids(embedded_model_dir, tmp_path, monkeypatch):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    theirs = sentence_transformers.SentenceTransformer(str(embedded_model_dir), device="cpu")
    theirs.save(str(tmp_path))
    assert not (tmp_path / "vocab.txt").exists() and (tmp_path / "tokenizer.json").is_file()
    ours = BertTokenizer.from_pretrained(tmp_path)
    assert ours.model_max_length == theirs.max_seq_length == 256  # its tokenizer_config.json says so
    assert_same_ids_as_transformers(ours, fast_reference(tmp_path))
    features = theirs.tokenizer(MIXED, padding=True, truncation=True, max_length=theirs.max_seq_length,
                                return_tensors="pt")  # what SentenceTransformer.encode feeds its model
    got = ours(MIXED, max_length=256)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert torch.equal(got[key], features[key]), key


def tiny_tokenizer_json(path: Path, vocab: list[str], lowercase: bool = True, **model) -> None:
    """A BERT WordPiece tokenizer.json written by the `tokenizers` library itself."""
    backend = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]", **model))
    backend.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.save(str(path))


def test_vocab_txt_is_read_first_and_tokenizer_json_alone_gives_the_libraries_ids(tmp_path):
    (tmp_path / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB), encoding="utf-8")
    shuffled = VOCAB[:5] + WORDS[::-1]  # the same tokens, other ids
    tiny_tokenizer_json(tmp_path / "tokenizer.json", shuffled)
    text = "The CAT sat on the mat, and the dog played!"
    both = BertTokenizer.from_pretrained(tmp_path)
    assert both.convert_ids_to_tokens(range(len(both))) == VOCAB
    (tmp_path / "vocab.txt").unlink()
    json_only = BertTokenizer.from_pretrained(tmp_path)
    assert json_only.convert_ids_to_tokens(range(len(json_only))) == shuffled
    reference = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert json_only.encode(text, add_special_tokens=False) == reference.encode(text).ids
    assert both.tokenize(text) == json_only.tokenize(text) == reference.encode(text).tokens


def test_tokenizer_json_settings_are_read_and_tokenizer_config_wins(tmp_path):
    vocab = VOCAB + ["Cat", "MAT"]
    tiny_tokenizer_json(tmp_path / "tokenizer.json", vocab, lowercase=False, max_input_chars_per_word=5)
    text = "Cat cat MAT mat played"
    cased = BertTokenizer.from_pretrained(tmp_path)
    assert (cased.lowercase, cased.max_input_chars_per_word) == (False, 5)
    reference = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert cased.encode(text, add_special_tokens=False) == reference.encode(text).ids
    assert cased.tokenize(text) == ["Cat", "cat", "MAT", "mat", "[UNK]"]  # "played" is over 5 characters
    # transformers lets tokenizer_config.json's settings override the saved normalizer's: so do we.
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    assert BertTokenizer.from_pretrained(tmp_path).tokenize(text) == ["cat", "cat", "mat", "mat", "[UNK]"]


# Accents composed and decomposed (NFC and NFD), lone and stacked combining marks, cased words, CJK, hangul
# (which NFD decomposes), control and zero-width characters, with MIXED's harder cases.
ACCENTED = ["café Café CAFÉ", "cafe\u0301 Cafe\u0301 CAFE\u0301", "naïve nai\u0308ve", "über Über u\u0308ber",
            "é e\u0301 \u0301 lone", "A\u030angstro\u0308m Ångström", "x\u0300\u0301y", "中文字符 中\u0301文",
            "한국어 텍스트", "\x00\x07 control \x7f\u200b chars", "İstanbul ß ﬁ", "re\u0301sume\u0301 résumé",
            *(text for text in MIXED if len(text) < 512)]  # the long one: the folders' windows differ
CASED_WORDS = ["café", "cafe", "Café", "CAFE", "caf", "##é", "é", "e", "##e", "##\u0301", "\u0301", "naïve",
               "naive", "na", "##ï", "##ive", "Ü", "ü", "u", "ber", "##ber", "über", "Über", "中", "文", "字",
               "符", "x", "y", "##y", "re", "##sum", "résumé", "resume", "Ångström", "Angstrom", "A",
               "##ngstrom", "lone", "control", "chars", "Hello", "hello", "World", "world"]
CASED_VOCAB = VOCAB + CASED_WORDS


@pytest.mark.parametrize("vocabulary", ["cased", "uncased"])
@pytest.mark.parametrize("lowercase, strip_accents", [(True, None), (True, False), (False, None),
                                                      (False, True)])
def test_accents_composed_or_decomposed_split_as_bert_tokenizer_fast(vocabulary, lowercase, strip_accents,
                                                                      tmp_path, embedded_model_dir):
    path = tmp_path / "vocab.txt"  # the folder holds vocab.txt alone: both read it with the settings given
    if vocabulary == "cased":
        path.write_text("".join(f"{t}\n" for t in CASED_VOCAB), encoding="utf-8")
    else:
        shutil.copy(embedded_model_dir / "vocab.txt", path)
    ours = BertTokenizer.from_vocab_file(path, lowercase=lowercase, strip_accents=strip_accents)
    theirs = transformers.BertTokenizerFast.from_pretrained(str(tmp_path), do_lower_case=lowercase,
                                                            strip_accents=strip_accents)
    for text in ACCENTED:
        assert ours.encode(text) == theirs(text)["input_ids"], repr(text)
    if vocabulary == "cased" and not lowercase and not strip_accents:  # the case the two libraries split
        assert ours.tokenize("cafe\u0301 café") == ["cafe", "##\u0301", "café"]


def normalizer_json(path: Path, normalizer) -> None:
    """A tokenizer.json with CASED_VOCAB and `normalizer`, written by the `tokenizers` library itself."""
    backend = Tokenizer(models.WordPiece({t: i for i, t in enumerate(CASED_VOCAB)}, unk_token="[UNK]"))
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.add_special_tokens(VOCAB[:5])  # "[MASK]" typed in a text is the token, as in a saved BERT
    backend.save(str(path))


@pytest.mark.parametrize("steps", [
    [normalizers.Lowercase(), normalizers.BertNormalizer(lowercase=True)],  # sentence-transformers' save
    [normalizers.Lowercase(), normalizers.BertNormalizer(lowercase=False)],  # lowercases, keeps accents
    [normalizers.BertNormalizer(lowercase=False, strip_accents=False), normalizers.Lowercase()],
    [normalizers.BertNormalizer(lowercase=False), normalizers.NFD(), normalizers.StripAccents()],
    [normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents(),
     normalizers.BertNormalizer(lowercase=False, strip_accents=False)],
], ids=["lowercase-bert", "lowercase-cased-bert", "cased-bert-lowercase", "cased-bert-nfd-strip",
        "nfd-lowercase-strip-cased-bert"])
def test_normalizer_sequences_that_lowercase_or_strip_accents_give_the_libraries_ids(steps, tmp_path):
    normalizer_json(tmp_path / "tokenizer.json", normalizers.Sequence(steps))
    ours = BertTokenizer.from_pretrained(tmp_path)
    reference = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in ACCENTED:
        assert ours.encode(text, add_special_tokens=False) == reference.encode(text).ids, repr(text)


@pytest.mark.parametrize("steps, named", [
    ([normalizers.BertNormalizer(), normalizers.NFKC()], "'NFKC'"),
    ([normalizers.BertNormalizer(lowercase=False), normalizers.NFD()], "'NFD'"),  # decomposed, not stripped
    ([normalizers.BertNormalizer(), normalizers.Replace("a", "b")], "'Replace'"),
    ([normalizers.Lowercase(), normalizers.NFD(), normalizers.StripAccents()],
     "'Lowercase' \\+ 'NFD' \\+ 'StripAccents', not 'BertNormalizer'"),
])
def test_normalizer_steps_that_change_meaning_otherwise_are_refused_by_name(steps, named, tmp_path):
    normalizer_json(tmp_path / "tokenizer.json", normalizers.Sequence(steps))
    with pytest.raises(ValueError, match=f"{tmp_path}.*{named}"):
        BertTokenizer.from_pretrained(tmp_path)


def test_a_tokenizer_json_that_is_not_bert_wordpiece_is_a_value_error_naming_the_file(tmp_path):
    path = tmp_path / "tokenizer.json"
    bpe = Tokenizer(models.BPE({"[UNK]": 0, "a": 1}, [], unk_token="[UNK]"))
    bpe.save(str(path))
    with pytest.raises(ValueError, match=r"tokenizer.json: model is 'BPE', not 'WordPiece'"):
        BertTokenizer.from_pretrained(tmp_path)
    tiny_tokenizer_json(path, VOCAB)
    saved = json.loads(path.read_text())
    for change, message in [
        ({"normalizer": {"type": "Lowercase"}}, "normalizer is 'Lowercase', not 'BertNormalizer'"),
        ({"pre_tokenizer": None}, "pre_tokenizer is None, not 'BertPreTokenizer'"),
        ({"model": {**saved["model"], "continuing_subword_prefix": "@@"}}, "continuing_subword_prefix='@@'"),
        ({"added_tokens": [{"id": len(VOCAB) + 5, "content": "<new>"}]}, "added token '<new>' has id"),
        ({"normalizer": {**saved["normalizer"], "lowercase": "no"}}, "BertNormalizer's lowercase is 'no'"),
        ({"model": {**saved["model"], "vocab": {"[UNK]": 0, "a": 2}}}, "gives 'a' the id 2"),
    ]:
        path.write_text(json.dumps({**saved, **change}))
        with pytest.raises(ValueError, match=f"{tmp_path}.*{message}"):
            BertTokenizer.from_pretrained(tmp_path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json is not valid JSON"):
        BertTokenizer.from_pretrained(tmp_path)
    path.unlink()
    with pytest.raises(FileNotFoundError, match="no vocab.txt or tokenizer.json in"):
        BertTokenizer.from_pretrained(tmp_path)


# ---------------------------------------------------------------- the call


@pytest.fixture(scope="module")
def tok() -> BertTokenizer:
    return BertTokenizer(VOCAB, model_max_length=64)


@pytest.fixture(scope="module")
def reference(tok, tmp_path_factory):
    return fast_reference(tok.save(tmp_path_factory.mktemp("vocab")))


def same(ours, theirs) -> None:
    assert set(ours) == set(theirs)
    for key, value in ours.items():
        expected = theirs[key]
        assert type(value) is type(expected), key
        if isinstance(value, np.ndarray):
            assert value.dtype == expected.dtype == np.int64 and np.array_equal(value, expected), key
        elif isinstance(value, torch.Tensor):
            assert value.dtype == torch.long and torch.equal(value, expected), key
        else:
            assert value == expected, key


@pytest.mark.parametrize("kwargs", [
    {"return_tensors": "np"},
    {"return_tensors": "pt"},
    {"return_tensors": None, "padding": False},
    {"return_tensors": "np", "add_special_tokens": False},
    {"return_tensors": None, "padding": False, "add_special_tokens": False, "max_length": 4},
    {"return_tensors": "pt", "return_attention_mask": False},
    {"return_tensors": "pt", "return_token_type_ids": False},
    {"return_tensors": "np", "return_attention_mask": False, "return_token_type_ids": False},
], ids=str)
def test_call_keywords_and_forms_equal_transformers(tok, reference, kwargs):
    options = {"padding": True, "truncation": True, **kwargs}
    a, b = SENTENCES, SENTENCES[::-1]
    same(tok(text=a, text_pair=b, **kwargs), reference(text=a, text_pair=b, **options))
    same(tok(list(zip(a, b)), **kwargs), reference(list(zip(a, b)), **options))  # (a, b) tuples
    same(tok([list(p) for p in zip(a, b)], **kwargs), reference([list(p) for p in zip(a, b)], **options))
    same(tok(text=a, **kwargs), reference(text=a, **options))
    same(tok(a[0], b[0], **kwargs), reference(a[0], b[0], **options))  # one pair: a batch of one, or flat


def test_the_names_transformers_users_type_mean_the_same(tok, reference):
    assert len(tok) == len(reference) == len(VOCAB)
    for name in ("pad_token_id", "cls_token_id", "sep_token_id", "mask_token_id", "unk_token_id"):
        assert getattr(tok, name) == getattr(reference, name), name
    for text, pair in [(SENTENCES[2], None), (SENTENCES[0], SENTENCES[4])]:
        assert tok.encode(text, pair) == reference.encode(text, pair, truncation=True)
        assert tok.encode(text, pair, add_special_tokens=False, max_length=5) == reference.encode(
            text, pair, add_special_tokens=False, truncation=True, max_length=5)
        assert tok.encode(text, pair, max_length=20, truncation="only_first") == reference.encode(
            text, pair, truncation="only_first", max_length=20)
    # decode keeps the special tokens unless told, as in transformers (test_tokenizer.py checks the
    # clean-up against the pure-Python tokenizer's; these sentences need only what both do).
    rows = tok(SENTENCES, return_tensors="pt").input_ids
    for skip in (False, True):
        expected = reference.batch_decode(rows, skip_special_tokens=skip)
        assert tok.batch_decode(rows, skip_special_tokens=skip) == expected
        assert tok.batch_decode(rows.numpy(), skip_special_tokens=skip) == expected
        assert [tok.decode(row.tolist(), skip_special_tokens=skip) for row in rows] == expected
    assert tok.decode(tok.cls_token_id) == reference.decode(reference.cls_token_id) == "[CLS]"


def test_true_means_longest_first_for_a_pair_and_head_for_a_single_text(tok):
    pieces = lambda inputs: tok.convert_ids_to_tokens(inputs["input_ids"])  # noqa: E731
    one = dict(return_tensors=None)
    # Worked by hand. Budget 8 - 3 = 5 for 4 + 4 pieces: a tie, so B gets the odd piece (`tokenizers`).
    a, b = "the cat sat on", "a dog ran today"
    assert pieces(tok(a, b, max_length=8, **one)) == [
        "[CLS]", "the", "cat", "[SEP]", "a", "dog", "ran", "[SEP]"]
    assert tok(a, b, max_length=8, **one) == tok(a, b, max_length=8, truncation="longest_first", **one)
    assert pieces(tok(a, b, max_length=8, truncation="only_first", **one)) == [
        "[CLS]", "the", "[SEP]", "a", "dog", "ran", "today", "[SEP]"]
    assert pieces(tok(a, b, max_length=8, truncation="only_second", **one)) == [
        "[CLS]", "the", "cat", "sat", "on", "[SEP]", "a", "[SEP]"]
    assert pieces(tok(a, b, max_length=8, truncation="tail", **one)) == [
        "[CLS]", "sat", "on", "[SEP]", "dog", "ran", "today", "[SEP]"]
    # only_second must remove 4 of B's 4 pieces: transformers refuses too ("Sequence to truncate too short").
    with pytest.raises(ValueError, match=r"'only_second' must remove 4 pieces from the second \(B\) segment"):
        tok(a, b, max_length=7, truncation="only_second")
    # A single text: True, longest_first and only_first keep its head; only_second has nothing to cut.
    for truncation in (True, "head", "longest_first", "only_first"):
        assert pieces(tok(a, max_length=4, truncation=truncation, **one)) == [
            "[CLS]", "the", "cat", "[SEP]"]
    with pytest.raises(ValueError, match="cuts the second text of a pair, and this text has none"):
        tok(a, max_length=4, truncation="only_second")


def test_call_errors_name_the_argument(tok):
    cases = [
        (TypeError, "text holds \\(a, b\\) pairs, so text_pair must be None",
         lambda: tok([("a", "b")], ["c"])),
        (TypeError, r"text\[1\] must be an \(a, b\) pair of str, as text holds pairs, got str",
         lambda: tok([("a", "b"), "c"])),
        (TypeError, r"text\[0\] must be an \(a, b\) pair of str.*got a tuple of 3 \(str, str, str\)",
         lambda: tok([("a", "b", "c")])),
        (TypeError, "text must be a str, a list of str or a list of \\(a, b\\) pairs, got None",
         lambda: tok(None)),
        (ValueError, "return_tensors must be 'pt' \\(torch tensors\\), 'np' \\(numpy arrays\\) or None",
         lambda: tok(["a"], return_tensors="tf")),
        (TypeError, "input_ids is a numpy array, not a tensor",
         lambda: tok(["a"], return_tensors="np").to("cpu")),
        (ValueError, "max_length must be >= 0, got -1",
         lambda: tok(["a"], add_special_tokens=False, max_length=-1)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


# ---------------------------------------------------------------- what the tokenizers Encodings hold


ENCODING_KEYS = dict(return_offsets_mapping=True, return_special_tokens_mask=True)


@pytest.mark.parametrize("kwargs", [
    {"return_tensors": None},
    {"return_tensors": "pt", "max_length": 9},
    {"return_tensors": "np", "padding": "max_length", "max_length": 16, "truncation": "only_second"},
    {"return_tensors": None, "padding": False, "add_special_tokens": False, "max_length": 5},
    {"return_tensors": "pt", "max_length": 9, "return_overflowing_tokens": True, "stride": 2},
    {"return_tensors": None, "max_length": 18, "truncation": "only_first", "return_overflowing_tokens": True},
    {"return_tensors": "pt", "max_length": 7, "truncation": "tail"},
], ids=str)
def test_offsets_special_tokens_mask_overflow_and_word_ids_equal_transformers(tok, reference, kwargs):
    options = {"padding": True, "truncation": True, **kwargs}
    if options["truncation"] == "tail":  # transformers says it with truncation_side
        options["truncation"], reference.truncation_side = True, "left"
    try:
        for a, b in ((SENTENCES, None), (SENTENCES[:3], SENTENCES[3:])):
            if b is None and options["truncation"] == "only_second":
                continue
            got, want = tok(a, b, **ENCODING_KEYS, **kwargs), reference(a, b, **ENCODING_KEYS, **options)
            same(got, want)
            assert [got.word_ids(i) for i in range(len(got["input_ids"]))] == [
                want.word_ids(i) for i in range(len(want["input_ids"]))]
        same(tok(SENTENCES[2], **ENCODING_KEYS, **kwargs),
             reference(SENTENCES[2], **ENCODING_KEYS, **options))
    finally:
        reference.truncation_side = "right"


def test_overflowing_windows_of_a_long_text_with_stride_equal_transformers(tok, reference):
    text = " ".join(SENTENCES)
    for max_length, stride in ((8, 0), (8, 3), (12, 5)):
        got = tok([text, "a dog"], max_length=max_length, stride=stride, return_overflowing_tokens=True)
        want = reference([text, "a dog"], max_length=max_length, stride=stride,
                         return_overflowing_tokens=True, truncation=True, padding=True, return_tensors="pt")
        same(got, want)
        assert got["overflow_to_sample_mapping"].tolist() == [0] * (len(got["input_ids"]) - 1) + [1]
    with pytest.raises(ValueError, match="stride=6 must be below the 6 word pieces a window of max_length=8"):
        tok(text, max_length=8, stride=6, return_overflowing_tokens=True)  # tokenizers would panic
    with pytest.raises(ValueError, match="stride=2 is the overlap of the overflowing windows: pass "
                                         "return_overflowing_tokens=True"):
        tok(text, stride=2)
    with pytest.raises(ValueError, match="truncation='head\\+tail' keeps two ends of a text"):
        tok(text, truncation="head+tail", return_offsets_mapping=True)
    with pytest.raises(ValueError, match="word_ids\\(\\) reads the tokenizers Encodings"):
        tok(text).word_ids()


def test_is_split_into_words_equals_transformers(tok, reference):
    words = [sentence.split() for sentence in SENTENCES]
    for kwargs in ({"return_tensors": None}, {"return_tensors": "pt", "max_length": 6}):
        options = {"padding": True, "truncation": True, **kwargs}
        got = tok(words, is_split_into_words=True, **kwargs)
        same(got, reference(words, is_split_into_words=True, **options))
        assert got.word_ids(2) == reference(words, is_split_into_words=True, **options).word_ids(2)
        same(tok(words[:3], words[3:], is_split_into_words=True, **kwargs),
             reference(words[:3], words[3:], is_split_into_words=True, **options))
        same(tok(words[4], is_split_into_words=True, **kwargs),  # one list of words: one example
             reference(words[4], is_split_into_words=True, **options))
    with pytest.raises(ValueError, match="text\\[0\\] is 30 tokens, more than max_length=8, and truncation"):
        tok(words[4] * 2, is_split_into_words=True, truncation=False, max_length=8)


def test_decode_keeps_transformers_5_spaces_unless_the_folder_or_call_cleans_up(embedded_model_dir, tmp_path):
    ours, theirs = BertTokenizer.from_pretrained(embedded_model_dir), fast_reference(embedded_model_dir)
    texts = MIXED + ["it's a test, don't.", "we're here , aren't we ?"]
    rows = ours(texts, padding=False, return_tensors=None)["input_ids"]
    for clean in (None, True, False):
        for skip in (False, True):
            assert ours.batch_decode(rows, skip, clean) == theirs.batch_decode(
                rows, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
    assert ours.decode(ours.encode("it's a test, don't.")) == "[CLS] it ' s a test, don ' t. [SEP]"
    shutil.copytree(embedded_model_dir, tmp_path, dirs_exist_ok=True)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["clean_up_tokenization_spaces"] = True
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    cleaning, reference = BertTokenizer.from_pretrained(tmp_path), fast_reference(tmp_path)
    assert cleaning.batch_decode(rows) == reference.batch_decode(rows)
    assert cleaning.decode(rows[-2]) == "[CLS] it's a test, don't. [SEP]"


@pytest.mark.checkpoint
def test_added_tokens_and_get_vocab_equal_transformers_and_survive_both_saves(embedded_model_dir, tmp_path):
    ours, theirs = BertTokenizer.from_pretrained(embedded_model_dir), fast_reference(embedded_model_dir)
    assert ours.get_vocab() == theirs.get_vocab()
    texts = ["a newword and [SPEC] x Newwords", "hellothere [SPEC]newword", "plain text, hello world"]
    for tokenizer in (ours, theirs):
        assert tokenizer.add_tokens(["newword", "hello"]) == 2  # hello, in the vocabulary, now matched whole
        assert tokenizer.add_tokens("[SPEC]", special_tokens=True) == 1
        assert tokenizer.add_tokens("newword") == 0
    assert (len(ours), ours.vocab_size) == (len(theirs), theirs.vocab_size) == (30524, 30522)
    assert ours.get_vocab() == theirs.get_vocab()

    def assert_same(mine) -> None:
        assert [mine.tokenize(t) for t in texts] == [theirs.tokenize(t) for t in texts]
        ids = mine(texts, return_tensors=None)["input_ids"]
        assert ids == theirs(texts, padding=True)["input_ids"]
        for skip in (False, True):
            assert mine.batch_decode(ids, skip) == theirs.batch_decode(ids, skip_special_tokens=skip)

    assert_same(ours)
    ours.save(tmp_path / "ours")  # vocab.txt and tokenizer_config.json's added_tokens_decoder
    theirs.save_pretrained(str(tmp_path / "theirs"))  # tokenizer.json's added_tokens
    assert_same(BertTokenizer.from_pretrained(tmp_path / "ours"))
    assert_same(BertTokenizer.from_pretrained(tmp_path / "theirs"))
    reread = fast_reference(tmp_path / "ours")
    assert [reread.tokenize(t) for t in texts] == [theirs.tokenize(t) for t in texts]
    model = BertModel(BertConfig.tiny(vocab_size=ours.vocab_size, hidden_size=8, num_attention_heads=2,
                                      max_position_embeddings=16))
    model.resize_token_embeddings(len(ours))  # the new ids have rows now
    assert model(**ours(texts[:1])).last_hidden_state.shape == (1, 9, 8)


def test_pad_is_what_transformers_data_collator_with_padding_gets(tok, reference):
    features = [dict(tok(text, return_tensors=None, return_special_tokens_mask=True), label=i)
                for i, text in enumerate(SENTENCES)]
    for kwargs in ({}, {"pad_to_multiple_of": 8}, {"padding": "max_length", "max_length": 20},
                   {"return_tensors": "np"}, {"return_tensors": None}):
        options = {"return_tensors": "pt", **kwargs}
        same(tok.pad(features, **kwargs), reference.pad(features, **options))
    no_mask = [{"input_ids": f["input_ids"]} for f in features]
    same(tok.pad(no_mask), reference.pad(no_mask, return_tensors="pt"))  # the mask is made
    same(tok.pad(no_mask, return_attention_mask=False), reference.pad(no_mask, return_attention_mask=False,
                                                                      return_tensors="pt"))
    columns = {"input_ids": [f["input_ids"] for f in features]}
    same(tok.pad(columns, return_tensors=None), reference.pad(columns))
    same(tok.pad(features[0], return_tensors=None), reference.pad(features[0]))  # one example
    collated = transformers.DataCollatorWithPadding(tok)(features)
    same(collated, transformers.DataCollatorWithPadding(reference)(features))
    assert set(collated) == {"input_ids", "token_type_ids", "attention_mask", "special_tokens_mask", "labels"}
    with pytest.raises(TypeError, match="pad takes a list of encoded examples"):
        tok.pad(["the cat"])


# ---------------------------------------------------------------- pair truncation


def test_pair_budgets_equal_the_tokenizers_library_on_every_small_case():
    # A word-level `tokenizers` pipeline with its own truncation and no special tokens: the Rust rule
    # BertTokenizerFast applies (transformers 5's BertTokenizer), on every pair of lengths and budget.
    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    for strategy in PAIR_STRATEGIES:
        for budget in range(0, 23):
            backend.enable_truncation(budget, strategy=strategy)
            for len_a in range(11):
                for len_b in range(11):
                    try:
                        ids = backend.encode("a " * len_a, "b " * len_b).ids
                        expected = (ids.count(1), ids.count(2))
                    except Exception:  # noqa: BLE001 - `tokenizers` raises a bare Exception
                        expected = "refused"
                    try:
                        got = pair_budgets(len_a, len_b, budget, strategy)
                    except ValueError:
                        got = "refused"
                    assert got == expected, (strategy, budget, len_a, len_b)


@pytest.fixture(scope="module")
def sts_pairs(data_dir) -> list[tuple[str, str]]:
    from tasks.data.course import read_sts

    return [(e.sentence1, e.sentence2) for name in ("sts-train.csv", "sts-dev.csv")
            for e in read_sts(data_dir / "cs224n" / name).examples]


def outcome(call):
    try:
        return call()
    except Exception:  # noqa: BLE001 - transformers raises a bare Exception, we a ValueError
        return "refused"


@pytest.mark.data
@pytest.mark.checkpoint
@pytest.mark.slow
@pytest.mark.parametrize("strategy", PAIR_STRATEGIES)
def test_every_sts_pair_that_needs_cutting_equals_bert_tokenizer_fast(embedded_model_dir, sts_pairs,
                                                                      strategy):
    ours, theirs = BertTokenizer.from_pretrained(embedded_model_dir), fast_reference(embedded_model_dir)
    lengths = {text: len(ours.tokenize(text)) for pair in sts_pairs for text in pair}
    for max_length in (16, 32, 64):
        cut = [(a, b) for a, b in sts_pairs if lengths[a] + lengths[b] + 3 > max_length]
        assert len(cut) > 20, max_length  # the lengths are chosen so that each cuts real pairs
        got = [outcome(lambda: ours.encode(a, b, max_length=max_length, truncation=strategy)) for a, b in cut]
        accepted = [pair for pair, ids in zip(cut, got) if ids != "refused"]
        # One batch for the pairs we cut (it raises if transformers refuses any); one by one for the rest.
        expected = iter(theirs(accepted, truncation=strategy, max_length=max_length)["input_ids"]
                        if accepted else [])
        want = [next(expected) if ids != "refused" else
                outcome(lambda: theirs(a, b, truncation=strategy, max_length=max_length)["input_ids"])
                for (a, b), ids in zip(cut, got)]
        differing = [(pair, g, w) for pair, g, w in zip(cut, got, want) if g != w]
        assert not differing, (max_length, len(differing), len(cut), differing[:3])

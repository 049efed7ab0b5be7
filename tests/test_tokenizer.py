"""The tokenizer, against `transformers`' pure-Python BERT tokenizer, plus hand-worked truncation examples.

The reference is the slow, pure-Python implementation (BasicTokenizer + WordpieceTokenizer): in
transformers 5 `BertTokenizer` is itself backed by the `tokenizers` library we build on, so the
pure-Python one lives on as `BertTokenizerLegacy`; in transformers 4 it is `BertTokenizer`.
Agreement is exact: token for token, ids and token type ids. Where the two references split
differently, decomposed accents ("e" + U+0301) kept unstripped, which the pure-Python one NFC-composes and
BertTokenizerFast does not, we follow BertTokenizerFast, what `transformers` users get
(test_tokenizer_interop.py). How a pair shares a window is held to the
`tokenizers`-backed one instead (BertTokenizerFast), whose rule truncation.py follows; more of that, and
the folders and call habits of `transformers` users, in test_tokenizer_interop.py.
"""

from __future__ import annotations

import json
import random
import shutil

import pytest
import torch

from minbert.text.inputs import BatchEncoding, Encoding
from minbert.text.tokenizer import BertTokenizer
from minbert.text.truncation import (TRUNCATION_STRATEGIES, head_tail_truncate, pair_budgets, truncate,
                                truncate_pair)

try:  # transformers >= 5: the pure-Python tokenizer, renamed
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as ReferenceTokenizer
except ImportError:  # transformers 4: BertTokenizer is the pure-Python one (BertTokenizerFast is not)
    from transformers import BertTokenizer as ReferenceTokenizer

# (lowercase, strip_accents): uncased BERT, uncased keeping accents, cased BERT, cased stripping accents.
SETTINGS = [(True, None), (True, False), (False, None), (False, True)]
SETTING_IDS = [f"lowercase={lc}-strip_accents={sa}" for lc, sa in SETTINGS]

TRICKY = [
    # accents, composed and decomposed; case mapping oddities
    "Hello, World!", "naïve café", "Ångström", "über Müller façade", "re\u0301sume\u0301 (decomposed)",
    "İstanbul ß ẞ ﬁ ﬀ", "Ω µ ω Σίσυφος", "Ünïcödé ÀÉÎÕÜ", "MiXeD CaSe TeXt UPPER",
    # CJK ideographs (split per character), kana and hangul (not split), U+2B820 (see below)
    "中文字符测试", "我爱北京天安门。", "ひらがな カタカナ 漢字まじり", "한국어 텍스트", "a\U0002B820b",
    # punctuation runs, symbols, emoji
    "...!!!???", "--==**~~", "😀🎉👍🏽 emoji ❤️", "Ⅻ ① ² ½", "$100 & €50 £3 ¥", "C++ C# .NET",
    "«quoted» „German“ ‘single’", "don't won't it's we're",
    # control, zero-width and exotic whitespace
    "\x00\x07\x1b control \x7f chars", "zero\u200bwidth\u200c joiners\u200d\ufeff", "tab\tnewline\ncr\r",
    "\u00a0nbsp\u3000ideographic space", "x\u2028y\u0085z", "\ufffd replacement",
    # unknown and over-long words, empty input
    "supercalifragilisticexpialidocious", "xqzvbnmlkj qwrtypsdfgh", "a" * 100, "a" * 101,
    "word " + "b" * 150 + " word", "", "   ", "\t\n",
    # numbers, URLs, special tokens typed in the text
    "3.14159 1,000,000 2nd 42% 1e-12", "https://www.example.com/path?q=1&r=two#frag user@example.com",
    "Hello [MASK] world [SEP] x",
]


@pytest.fixture(scope="module")
def vocab_path(embedded_model_dir):
    return embedded_model_dir / "vocab.txt"


@pytest.fixture(scope="module")
def pair_of(vocab_path):
    """(ours, reference) for a (lowercase, strip_accents) setting, built once per module."""
    cache = {}

    def build(lowercase: bool, strip_accents: bool | None):
        if (lowercase, strip_accents) not in cache:
            ours = BertTokenizer.from_vocab_file(vocab_path, lowercase=lowercase, strip_accents=strip_accents)
            ref = ReferenceTokenizer(str(vocab_path), do_lower_case=lowercase, strip_accents=strip_accents)
            assert not getattr(ref, "is_fast", False), "the reference must be the pure-Python tokenizer"
            cache[lowercase, strip_accents] = ours, ref
        return cache[lowercase, strip_accents]

    return build


@pytest.fixture(scope="module")
def tok(pair_of) -> BertTokenizer:
    return pair_of(True, None)[0]


@pytest.fixture(scope="module")
def sst_sentences(data_dir) -> list[str]:
    """The first 200 sentences of SST dev (tab-separated: unnamed index, id, sentence, sentiment)."""
    lines = (data_dir / "cs224n" / "ids-sst-dev.csv").read_text(encoding="utf-8").split("\n")
    assert lines[0].split("\t")[1:] == ["id", "sentence", "sentiment"], lines[0]
    return [line.split("\t")[2] for line in lines[1:201]]


def reference_encode(ref, text, pair=None, **kwargs) -> tuple[list[int], list[int]]:
    out = ref(text, pair, return_token_type_ids=True, **kwargs)
    return out["input_ids"], out["token_type_ids"]


# ---------------------------------------------------------------- parity with the reference


@pytest.mark.checkpoint
@pytest.mark.parametrize("lowercase, strip_accents", SETTINGS, ids=SETTING_IDS)
def test_tricky_strings_match_reference_token_for_token(pair_of, lowercase, strip_accents):
    ours, ref = pair_of(lowercase, strip_accents)
    for text in TRICKY:
        assert ours.tokenize(text) == ref.tokenize(text), repr(text)
        got = ours.encode_example(text)
        assert (got.input_ids, got.token_type_ids) == reference_encode(ref, text), repr(text)


@pytest.mark.checkpoint
@pytest.mark.parametrize("lowercase, strip_accents", SETTINGS, ids=SETTING_IDS)
def test_tricky_pairs_match_reference_with_segment_ids(pair_of, lowercase, strip_accents):
    ours, ref = pair_of(lowercase, strip_accents)
    for a, b in zip(TRICKY, reversed(TRICKY)):
        got = ours.encode_example(a, b)
        assert (got.input_ids, got.token_type_ids) == reference_encode(ref, a, b), (a, b)


@pytest.mark.data
@pytest.mark.checkpoint
@pytest.mark.parametrize("lowercase, strip_accents", SETTINGS, ids=SETTING_IDS)
def test_sst_sentences_match_reference_single_and_batched(pair_of, sst_sentences, lowercase, strip_accents):
    ours, ref = pair_of(lowercase, strip_accents)
    expected = [reference_encode(ref, s) for s in sst_sentences]
    assert [tuple(ours.encode_example(s)[:2]) for s in sst_sentences] == expected
    batch = ours.batch_encode(sst_sentences, return_tensors=False)
    for row, types, mask, (ids, ref_types) in zip(*batch, expected):
        n = sum(mask)
        assert (row[:n], types[:n]) == (ids, ref_types)


@pytest.mark.data
@pytest.mark.checkpoint
@pytest.mark.parametrize("strategy, side", [("head", "right"), ("tail", "left")])
def test_head_and_tail_truncation_match_reference_sides_on_sst_pairs(pair_of, embedded_model_dir,
                                                                    sst_sentences, strategy, side):
    # The reference's truncation_side="left" is our "tail". Pairs share the budget by `tokenizers`' rule
    # (truncation.py), so their reference is the fast tokenizer; single texts keep the pure-Python one.
    from transformers import BertTokenizerFast

    ours, ref = pair_of(True, None)
    fast = BertTokenizerFast.from_pretrained(str(embedded_model_dir))
    rng = random.Random(0)
    old_side, ref.truncation_side, fast.truncation_side = ref.truncation_side, side, side
    try:
        for _ in range(150):
            a, b, m = rng.choice(sst_sentences), rng.choice(sst_sentences), rng.randint(3, 40)
            got = ours.encode_example(a, b, max_length=m, truncation=strategy)
            want = reference_encode(fast, a, b, truncation="longest_first", max_length=m)
            assert (got.input_ids, got.token_type_ids) == want, (a, b, m)
            got = ours.encode_example(a, max_length=m, truncation=strategy)
            assert got.input_ids == reference_encode(ref, a, truncation=True, max_length=m)[0], (a, m)
    finally:
        ref.truncation_side = old_side


@pytest.mark.checkpoint
def test_cjk_extension_e_is_split_like_google_bert(tok):
    # `tokenizers` starts this block at U+2B920; Google's BERT (and the reference) at U+2B820.
    assert tok.tokenize("a\U0002B820b a\U0002B91Fb a\U0002B920b") == ["a", "[UNK]", "b"] * 3


@pytest.mark.checkpoint
def test_decode_with_clean_up_matches_the_pure_python_reference(pair_of, sst_sentences):
    """The pure-Python tokenizer cleans up spaces by default ("it's"); transformers 5's tokenizer, and ours,
    only when asked (test_tokenizer_interop.py holds the default to it)."""
    ours, ref = pair_of(True, None)
    for text in sst_sentences[:50] + TRICKY:
        ids = ours.encode(text, "A second sentence, isn't it?")
        for skip in (True, False):
            assert (ours.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=True)
                    == ref.decode(ids, skip_special_tokens=skip))
    rows = [ours.encode(text) for text in sst_sentences[:8]]
    assert ours.batch_decode(rows, clean_up_tokenization_spaces=True) == ref.batch_decode(rows)
    assert (ours.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=True)
            == ref.batch_decode(rows, skip_special_tokens=True))


# ---------------------------------------------------------------- vocabulary and special tokens


@pytest.mark.checkpoint
def test_special_token_ids_and_vocab_size_of_bert_base_uncased(tok):
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (
        0, 100, 101, 102, 103)
    assert tok.vocab_size == len(tok) == 30522
    specials = ["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"]
    assert tok.convert_ids_to_tokens([101, 102, 0, 103, 100]) == specials
    assert tok.convert_tokens_to_ids(["[CLS]", "hello", "notatokenatall"]) == [101, 7592, 100]


@pytest.mark.checkpoint
def test_words_longer_than_100_characters_become_unk(tok):
    assert "[UNK]" not in tok.tokenize("a" * 100)
    assert tok.tokenize("a" * 101) == ["[UNK]"]
    assert tok.tokenize("x " + "a" * 101 + " y") == ["x", "[UNK]", "y"]


@pytest.mark.checkpoint
def test_decode_round_trips_vocabulary_words(tok):
    sample = tok.convert_ids_to_tokens(range(1996, tok.vocab_size, 37))  # 1996 = "the": words start here
    words = [t for t in sample if t.isalpha() and t.islower()]
    assert len(words) > 500
    for word in words:
        assert tok.decode(tok.convert_tokens_to_ids([word])) == word
        assert tok.decode(tok.encode(word), skip_special_tokens=True) == word
    sentence = " ".join(words[:40])
    assert tok.decode(tok.encode(sentence, add_special_tokens=False)) == sentence
    assert tok.decode(torch.tensor(tok.encode("hello world"))) == "[CLS] hello world [SEP]"


@pytest.mark.checkpoint
def test_empty_and_whitespace_only_give_cls_sep(tok):
    for text in ["", "   ", "\t\n\u200b"]:
        assert tok.encode_example(text) == Encoding([101, 102], [0, 0], [1, 1])
    assert tok.encode_example("", "") == Encoding([101, 102, 102], [0, 0, 1], [1, 1, 1])


# ---------------------------------------------------------------- pairs, batches and padding


@pytest.mark.checkpoint
def test_pair_layout_and_segment_ids_hand_worked(tok):
    got = tok.encode_example("Hello world", "good bye")
    tokens = tok.convert_ids_to_tokens(got.input_ids)
    assert tokens == ["[CLS]", "hello", "world", "[SEP]", "good", "bye", "[SEP]"]
    assert got.token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert got.attention_mask == [1] * 7


@pytest.mark.checkpoint
def test_batch_pads_with_pad_id_and_masks_padding(tok):
    batch = tok.batch_encode(["a", "a b c"])
    assert isinstance(batch, BatchEncoding)
    a, b, c = tok.convert_tokens_to_ids(["a", "b", "c"])
    assert batch.input_ids.dtype == torch.long and batch.input_ids.shape == (2, 5)  # (B, T)
    assert batch.input_ids.tolist() == [[101, a, 102, 0, 0], [101, a, b, c, 102]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch.token_type_ids.tolist() == [[0] * 5, [0] * 5]

    pairs = tok.batch_encode(["a", "a b c"], ["b c", "c"], padding="max_length", max_length=9)
    assert pairs.input_ids.tolist() == [[101, a, 102, b, c, 102, 0, 0, 0], [101, a, b, c, 102, c, 102, 0, 0]]
    assert pairs.token_type_ids.tolist() == [[0, 0, 0, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 0, 0]]
    assert pairs.attention_mask.tolist() == [[1] * 6 + [0] * 3, [1] * 7 + [0] * 2]
    assert all(t.dtype == torch.long for t in pairs)


@pytest.mark.checkpoint
def test_batch_rows_equal_single_encodes(tok):
    texts, pairs = TRICKY[:19], TRICKY[19:38]
    for strategy in TRUNCATION_STRATEGIES + ("longest_first",):
        batch = tok.batch_encode(texts, pairs, max_length=24, truncation=strategy, return_tensors=False)
        for i, (a, b) in enumerate(zip(texts, pairs)):
            single = tok.encode_example(a, b, max_length=24, truncation=strategy)
            n = len(single.input_ids)
            row = [batch.input_ids[i][:n], batch.token_type_ids[i][:n], batch.attention_mask[i][:n]]
            assert row == list(single)
            assert batch.attention_mask[i][n:] == [0] * (len(batch.input_ids[i]) - n)


@pytest.mark.checkpoint
def test_empty_batch_keeps_two_dimensions(tok):
    assert tok.batch_encode([]).input_ids.shape == (0, 0)
    assert tok.batch_encode([], padding="max_length", max_length=8).attention_mask.shape == (0, 8)


# ---------------------------------------------------------------- truncation


def test_truncate_strategies_keep_the_stated_pieces():
    pieces = list(range(10))
    assert truncate(pieces, 6, "head") == [0, 1, 2, 3, 4, 5]
    assert truncate(pieces, 6, "tail") == [4, 5, 6, 7, 8, 9]
    assert truncate(pieces, 10, "tail") == pieces and truncate(pieces, 0, "head") == []
    # head+tail at budget 6: head = 128 * 6 // 510 = 1, tail = 5.
    assert truncate(pieces, 6, "head+tail") == [0, 5, 6, 7, 8, 9]
    assert truncate(pieces, 6, "head+tail", head_tokens=255) == [0, 1, 2, 7, 8, 9]  # 255*6//510 = 3


def test_head_tail_is_128_plus_382_at_bert_window_and_scales_below():
    long = list(range(1000))
    kept = head_tail_truncate(long, 510)
    assert kept == list(range(128)) + list(range(1000 - 382, 1000))
    kept = head_tail_truncate(long, 126)  # max_length 128: head 128 * 126 // 510 = 31, tail 95
    assert kept == list(range(31)) + list(range(1000 - 95, 1000))
    assert head_tail_truncate(long, 510, head_tokens=0) == list(range(490, 1000))
    assert head_tail_truncate(long[:300], 510) == long[:300]
    assert head_tail_truncate("abcdefghij", 5, head_tokens=204) == list("abhij")  # 204*5//510 = 2


@pytest.mark.checkpoint
def test_encode_truncation_hand_worked(tok):
    text = "a b c d e f g h"  # eight one-piece words
    pieces = lambda enc: tok.convert_ids_to_tokens(enc.input_ids)  # noqa: E731
    assert pieces(tok.encode_example(text, max_length=6)) == ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    assert pieces(tok.encode_example(text, max_length=6, truncation="tail")) == [
        "[CLS]", "e", "f", "g", "h", "[SEP]"]
    # budget 4: head = 128 * 4 // 510 = 1.
    head_tail = pieces(tok.encode_example(text, max_length=6, truncation="head+tail"))
    assert head_tail == ["[CLS]", "a", "f", "g", "h", "[SEP]"]
    # Pair, budget 9 - 3 = 6 of 8 + 2: A (longer) is cut to 4; each strategy then cuts A its way.
    pair = {s: pieces(tok.encode_example(text, "x y", max_length=9, truncation=s))
            for s in TRUNCATION_STRATEGIES}
    assert pair["head"] == ["[CLS]", "a", "b", "c", "d", "[SEP]", "x", "y", "[SEP]"]
    assert pair["tail"] == ["[CLS]", "e", "f", "g", "h", "[SEP]", "x", "y", "[SEP]"]
    assert pair["head+tail"] == ["[CLS]", "a", "f", "g", "h", "[SEP]", "x", "y", "[SEP]"]


def test_pair_budgets_hand_worked():
    # longest_first: the longer is cut to the shorter's length first, then the budget is halved and the
    # odd piece goes to the longer one, to B on a tie (`tokenizers`' rule; the pure-Python one gave A 3).
    assert pair_budgets(4, 4, 5) == (2, 3)
    assert pair_budgets(8, 2, 6) == (4, 2)  # only the longer one is cut
    assert pair_budgets(7, 3, 5) == (3, 2)  # both cut: 5 // 2 = 2 to the shorter, 3 to the longer
    assert pair_budgets(3, 7, 5) == (2, 3)
    assert pair_budgets(4, 4, 8) == (4, 4)  # fits: nothing cut
    assert pair_budgets(8, 2, 6, "only_first") == (4, 2) and pair_budgets(8, 2, 9, "only_second") == (8, 1)
    assert pair_budgets(3, 3, 0, "only_first") == (0, 0)  # budget 0 empties both, as `tokenizers` does
    assert truncate_pair(list("abcdefgh"), list("wxyz"), 6, "tail") == (list("fgh"), list("xyz"))


@pytest.mark.checkpoint
def test_lengths_never_exceed_max_length(tok):
    rng = random.Random(0)
    plain = [t for t in TRICKY if "[SEP]" not in t]  # a typed "[SEP]" is a real separator
    for strategy in TRUNCATION_STRATEGIES:
        for max_length in range(3, 30):
            texts = [rng.choice(plain) * rng.randint(1, 4) for _ in range(6)]
            pairs = [rng.choice(plain) for _ in range(6)]
            for batch in (tok.batch_encode(texts, max_length=max_length, truncation=strategy),
                          tok.batch_encode(texts, pairs, max_length=max_length, truncation=strategy)):
                assert batch.input_ids.shape[1] <= max_length
            padded = tok.batch_encode(texts, pairs, max_length=max_length, truncation=strategy,
                                      padding="max_length")
            assert padded.input_ids.shape == (6, max_length)
            # Every row still ends in [SEP] and, for pairs, holds exactly two of them.
            lengths = padded.attention_mask.sum(1)
            assert (padded.input_ids[torch.arange(6), lengths - 1] == tok.sep_token_id).all()
            assert ((padded.input_ids == tok.sep_token_id).sum(1) == 2).all()


# ---------------------------------------------------------------- saving and loading


@pytest.mark.checkpoint
def test_from_pretrained_reads_the_embedded_checkpoint(embedded_model_dir):
    tok = BertTokenizer.from_pretrained(embedded_model_dir)
    assert (tok.lowercase, tok.strip_accents, tok.tokenize_chinese_chars) == (True, None, True)
    assert tok.model_max_length == 512
    assert tok.tokenize("Hello World") == ["hello", "world"]


@pytest.mark.checkpoint
def test_save_then_from_pretrained_round_trips(pair_of, vocab_path, tmp_path):
    original = pair_of(False, True)[0]
    original.save(tmp_path)
    assert (tmp_path / "vocab.txt").read_bytes() == vocab_path.read_bytes()
    loaded = BertTokenizer.from_pretrained(tmp_path)
    assert (loaded.lowercase, loaded.strip_accents, loaded.model_max_length) == (False, True, 512)
    for text in TRICKY:
        assert loaded.encode_example(text, "Pair Ünïcödé") == original.encode_example(text, "Pair Ünïcödé")
    # transformers reads what we wrote, with the same settings.
    ref = ReferenceTokenizer.from_pretrained(str(tmp_path))
    assert reference_encode(ref, "Ünïcödé Café")[0] == original.encode("Ünïcödé Café")


@pytest.mark.checkpoint
def test_from_pretrained_config_edge_cases(vocab_path, tmp_path):
    shutil.copy(vocab_path, tmp_path / "vocab.txt")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"model_max_length": int(1e30)}))  # HF's "not set"
    assert BertTokenizer.from_pretrained(tmp_path).model_max_length == 512
    config.write_text(json.dumps({"do_lower_case": False, "model_max_length": 128}))
    tok = BertTokenizer.from_pretrained(tmp_path)
    assert tok.lowercase is False and len(tok.encode("word " * 500)) == 128
    config.write_text(json.dumps({"unk_token": "<unk>"}))
    with pytest.raises(ValueError, match="unk_token"):
        BertTokenizer.from_pretrained(tmp_path)
    config.write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        BertTokenizer.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        BertTokenizer.from_pretrained(tmp_path / "nowhere")


# ---------------------------------------------------------------- errors


@pytest.mark.checkpoint
def test_bad_arguments_raise_errors_that_name_the_problem(tok):
    with pytest.raises(ValueError, match=r"truncation must be one of .*head\+tail.*only_second.*'middle'"):
        tok.encode_example("x", truncation="middle")
    with pytest.raises(ValueError, match=r"truncation must be one of"):
        tok.batch_encode(["x"], truncation="longest-first")
    with pytest.raises(ValueError, match=r"example 1 of the batch.*'only_second' cuts the second text"):
        tok.batch_encode(["x", "a b c d"], truncation="only_second", max_length=4)
    with pytest.raises(ValueError, match=r"max_length=1 is too small.*2 special tokens"):
        tok.encode("x", max_length=1)
    with pytest.raises(ValueError, match=r"max_length=2 is too small.*3 special tokens"):
        tok.batch_encode(["x"], ["y"], max_length=2)
    with pytest.raises(ValueError, match="padding must be one of"):
        tok.batch_encode(["x"], padding="left")
    with pytest.raises(TypeError, match="text must be a str, got int"):
        tok.encode(42)
    with pytest.raises(TypeError, match="text_pair must be a str, got bytes"):
        tok.encode("x", b"y")
    with pytest.raises(TypeError, match="text must be a str, got NoneType"):
        tok.tokenize(None)
    with pytest.raises(TypeError, match="single str"):
        tok.batch_encode("not a list")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got float"):
        tok.batch_encode(["ok", 3.5])
    with pytest.raises(ValueError, match="texts has 2 items but text_pairs has 1"):
        tok.batch_encode(["a", "b"], ["c"])
    with pytest.raises(ValueError, match=r"id 30522 is outside the vocabulary \[0, 30522\)"):
        tok.decode([101, 30522])
    with pytest.raises(TypeError, match="got a str"):
        tok.convert_tokens_to_ids("hello")
    with pytest.raises(ValueError, match="head_tokens"):
        tok.encode_example("x", truncation="head+tail", head_tokens=600)


def test_vocabulary_without_a_special_token_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no \[MASK\] token"):
        BertTokenizer.from_vocab_file(path)

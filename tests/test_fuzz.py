"""Property-based tests (hypothesis): the tokenizer and the data readers on arbitrary input.

- The tokenizer never crashes on arbitrary Unicode (any code point hypothesis generates, controls, emoji,
  combining marks, zero-width characters), never returns more than max_length ids (single texts and pairs,
  every truncation strategy), and keeps ids, segments and mask the same length with [CLS] first and [SEP]
  closing each segment; sentences of vocabulary words survive encode -> decode unchanged.
- Every reader, given arbitrary bytes as its file, returns examples or raises our DataFileError (which
  names the file); never another exception, never a Python traceback from deep inside csv or json.

Examples per property: 150 (hypothesis's default is 100); no deadline, since a cold tokenizer call can
be slow on a busy machine. Failures print hypothesis's minimal example.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from minbert.text.tokenizer import BertTokenizer
from minbert.text.truncation import TRUNCATION_STRATEGIES
from pretrain.corpus import read_text_documents
from tasks.data.course import read_split, task_files
from tasks.data.examples import DataFileError
from tasks.data.glue import read_glue, read_trec
from tasks.data.hierarchy import read_hwv

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir) -> BertTokenizer:
    return BertTokenizer.from_pretrained(embedded_model_dir)


@pytest.fixture(scope="module")
def vocabulary_words(embedded_model_dir) -> list[str]:
    """Whole-word entries of the vocabulary made of ASCII letters and digits (no ##pieces, no [specials])."""
    lines = (Path(embedded_model_dir) / "vocab.txt").read_text(encoding="utf-8").splitlines()
    allowed = set(string.ascii_lowercase + string.digits)
    return [w for w in lines if w and set(w) <= allowed]


# ----- tokenizer -----------------------------------------------------------------------------------

# Cs: lone surrogates
unicode_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


def types_no_special_token(*texts: str) -> bool:
    """A special token typed in the text ("[SEP]") is that token, as in transformers (tests/test_tokenizer.py
    checks it against the reference); the layout below counts only the ones encoding adds."""
    return not any(special in text for text in texts
                   for special in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"))


def check_layout(tokenizer, encoding, max_length: int, pair: bool) -> None:
    ids, segments, mask = encoding.input_ids, encoding.token_type_ids, encoding.attention_mask
    assert len(ids) == len(segments) == len(mask) <= max_length
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert all(m == 1 for m in mask)
    assert ids.count(tokenizer.sep_token_id) == (2 if pair else 1)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    if pair:
        first_sep = ids.index(tokenizer.sep_token_id)
        assert segments == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)


@FUZZ
@given(text=unicode_text, max_length=st.integers(3, 64), truncation=st.sampled_from(TRUNCATION_STRATEGIES))
def test_any_unicode_text_encodes_within_the_limit(tokenizer, text, max_length, truncation):
    assume(types_no_special_token(text))
    check_layout(tokenizer, tokenizer.encode_example(text, max_length=max_length, truncation=truncation),
                 max_length, False)
    tokenizer.decode(tokenizer.encode(text))  # and decodes without error


@FUZZ
@given(first=unicode_text, second=unicode_text, max_length=st.integers(3, 64),
       truncation=st.sampled_from(TRUNCATION_STRATEGIES))
def test_any_unicode_pair_encodes_within_the_limit(tokenizer, first, second, max_length, truncation):
    assume(types_no_special_token(first, second))
    check_layout(tokenizer,
                 tokenizer.encode_example(first, second, max_length=max_length, truncation=truncation),
                 max_length, True)


@FUZZ
@given(texts=st.lists(unicode_text, min_size=1, max_size=6), max_length=st.integers(3, 48))
def test_batches_of_any_text_pad_to_one_width_within_the_limit(tokenizer, texts, max_length):
    batch = tokenizer.batch_encode(texts, max_length=max_length)
    assert batch.input_ids.shape == batch.attention_mask.shape == batch.token_type_ids.shape
    assert batch.input_ids.shape[0] == len(texts) and batch.input_ids.shape[1] <= max_length


@FUZZ
@given(data=st.data(), n=st.integers(1, 12))
def test_sentences_of_vocabulary_words_round_trip(tokenizer, vocabulary_words, data, n):
    words = data.draw(st.lists(st.sampled_from(vocabulary_words), min_size=n, max_size=n))
    sentence = " ".join(words)
    ids = tokenizer.encode(sentence)
    assert tokenizer.decode(ids, skip_special_tokens=True) == sentence
    assert len(ids) == len(words) + 2  # a vocabulary word is one piece


# ----- readers -----------------------------------------------------------------------------------

# Arbitrary bytes, and bytes that look more like the files (tabs, newlines, digits, quotes, a header).
raw_bytes = st.binary(max_size=400)
tabular_bytes = st.lists(st.sampled_from([b"\t", b"\n", b"\r\n", b'"', b"0", b"1", b"2.5", b"-1", b"nan",
                                          b"id", b"sentence", b"label", b"a b", b"\xef\xbb\xbf", b"\xff",
                                          b"\xe9"]),
                         max_size=60).map(b"".join)
any_file = st.one_of(raw_bytes, tabular_bytes)


def write(tmp_path_factory, name: str, content: bytes) -> Path:
    directory = tmp_path_factory.mktemp("fuzz")
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return directory


def rows_or_named_error(read, directory: Path) -> None:
    """`read()` returns at least one example, or raises DataFileError naming a file under `directory`."""
    try:
        result = read()
    except DataFileError as error:
        assert str(directory) in str(error)
    else:
        assert len(result.examples) >= 1


@FUZZ
@given(content=any_file, task=st.sampled_from(["sst", "quora", "sts", "cfimdb"]), strict=st.booleans())
def test_course_reader_gives_rows_or_a_data_file_error(tmp_path_factory, content, task, strict):
    directory = write(tmp_path_factory, task_files([task], ["train"])[0], content)
    rows_or_named_error(lambda: read_split(directory, task, "train", strict=strict), directory)


@FUZZ
@given(content=any_file, task=st.sampled_from(["rte", "sst2", "mrpc", "cola"]), strict=st.booleans())
def test_glue_reader_gives_rows_or_a_data_file_error(tmp_path_factory, content, task, strict):
    from tasks.data.glue import GLUE

    directory = write(tmp_path_factory, GLUE[task].files["train"], content)
    rows_or_named_error(lambda: read_glue(directory, task, "train", strict=strict), directory)


@FUZZ
@given(content=st.one_of(raw_bytes, st.lists(st.sampled_from([b"NUM:date ", b"HUM:ind ", b"what ", b"?",
                                                               b"\n", b"\xf0", b"x:y ", b":", b" "]),
                                             max_size=40).map(b"".join)),
       strict=st.booleans())
def test_trec_reader_gives_rows_or_a_data_file_error(tmp_path_factory, content, strict):
    path = write(tmp_path_factory, "train_5500.label", content) / "train_5500.label"
    try:
        examples, _ = read_trec(path, strict=strict)
    except DataFileError as error:
        assert str(path) in str(error)
    else:
        assert examples and all(e.coarse and e.fine and e.sentence for e in examples)


@FUZZ
@given(taxonomy=any_file, documents=st.one_of(raw_bytes, st.lists(st.sampled_from(
    [b'{"token": ["a b"], "label": ["A", "B"]}', b'{"token": []}', b"\n", b"{", b'"label"', b"[1]",
     b'{"label": 3}', b'{"token": ["x"], "label": []}', b'{"token": [1], "label": ["A"]}',
     b'{"token": ["x"], "label": ["Z"]}']),
    max_size=8).map(b"\n".join)))
def test_hwv_reader_gives_documents_or_a_data_file_error(tmp_path_factory, taxonomy, documents):
    root = tmp_path_factory.mktemp("fuzz")
    (root / "hwv").mkdir()
    (root / "hwv" / "hwv.taxonomy").write_bytes(b"Root\tA\nA\tB\n" if len(taxonomy) % 2 else taxonomy)
    (root / "hwv" / "hwv_val.json").write_bytes(documents)
    (root / "hwv" / "hwv_test.json").write_bytes(b"")
    try:
        data = read_hwv(root)
    except DataFileError as error:
        assert str(root / "hwv") in str(error)
    else:
        assert all(d.labels for d in data.splits["train"])


@FUZZ
@given(content=any_file, text_format=st.sampled_from(["plain", "wikitext"]))
def test_pretraining_text_reader_gives_documents_or_a_data_file_error(tmp_path_factory, content, text_format):
    path = write(tmp_path_factory, "corpus.txt", content) / "corpus.txt"
    try:
        documents = read_text_documents(path, text_format)
    except DataFileError as error:
        assert str(path) in str(error)
    else:
        assert all(document and all(sentence.strip() for sentence in document) for document in documents)

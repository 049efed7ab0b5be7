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

import contextlib
import errno
import io
import math
import os
import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from minbert.text.tokenizer import BertTokenizer
from minbert.text.truncation import TRUNCATION_STRATEGIES
from pretrain.corpus import read_text_documents
from tasks.data.conll import read_conll
from tasks.data.course import class_label, read_split, read_task, score_label, task_files
from tasks.data.examples import DataFileError, MalformedRowError
from tasks.data.inputs import first_change, fingerprint
from tasks.data.glue import read_glue, read_trec
from tasks.data.hierarchy import read_hwv
from tasks.training.settings import groups

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


# ----- the jobs' boundaries: faults drawn from a grammar, each asserting the contract -------------------
# (docs/bad_input.md, "Jobs: run folders, data readers, flags"). Examples per property: BOUNDARY_EXAMPLES,
# 40 by default (the properties below take about 15 s together on 2 busy cores);
# MINBERT_FUZZ_EXAMPLES=2000 for a longer, nightly-style run.

BOUNDARY_EXAMPLES = int(os.environ.get("MINBERT_FUZZ_EXAMPLES", "40"))
BOUNDARY = settings(max_examples=BOUNDARY_EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Numbers as people and programs mistype them: digits of other scripts, Python's underscores, signs,
# exponents, hex, spaces inside, NUL, the words float() knows.
number_text = st.one_of(
    st.integers(-10, 10).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet="0123456789._-+eExX \t\x00\u00a0\uff13\u0663\u0967\u2070", max_size=8),
    st.sampled_from(["nan", "-inf", "Infinity", "True", "0_3", "1_0", "３", "٣", "1e0", "2.0", " 1", "1.",
                     ".5", "0x1", "1e999", "", "3 ", "+2", "-0", "007", "--", "-"]),
)
ASCII_INTEGER = re.compile(r"-?[0-9]+(\.0*)?")
ASCII_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@BOUNDARY
@given(text=number_text)
def test_a_class_label_is_read_exactly_when_it_is_a_whole_number_in_ascii_digits(text):
    parse = class_label(range(5))
    wanted = ASCII_INTEGER.fullmatch(text.strip(" \t")) and int(float(text)) in range(5)
    try:
        value = parse(text)
    except ValueError as error:
        assert not wanted and repr(text) in str(error)
    else:
        assert wanted and value == float(text) and type(value) is int


@BOUNDARY
@given(text=number_text)
def test_a_score_label_is_read_exactly_when_it_is_a_finite_ascii_number_in_range(text):
    wanted = (ASCII_DECIMAL.fullmatch(text.strip(" \t")) and math.isfinite(float(text))
              and 0 <= float(text) <= 5)
    try:
        value = score_label(0.0, 5.0)(text)
    except ValueError as error:
        assert not wanted and repr(text) in str(error)
    else:
        assert wanted and value == float(text)


def numeric_flags() -> list[tuple[str, str, str]]:
    """(flag, its field, "N" or "X") of every numeric flag of the fine-tuning jobs' shared parser
    (tasks.sentiment's)."""
    return [(action.option_strings[0], action.dest, action.type.metavar)
            for action in build_sentiment_parser()._actions
            if getattr(action.type, "metavar", None) in ("N", "X") and action.option_strings]


def build_sentiment_parser():
    from tasks import sentiment

    return sentiment.build_parser()


@BOUNDARY
@given(data=st.data(), text=number_text)
def test_a_numeric_flag_takes_ascii_numbers_or_is_a_usage_error_naming_it(data, text):
    flag, dest, kind = data.draw(st.sampled_from(numeric_flags()))
    pattern = re.compile(r"-?[0-9]+") if kind == "N" else ASCII_DECIMAL
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            parsed = build_sentiment_parser().parse([f"{flag}={text}"])
    except SystemExit as error:
        # refused as a number ("argument --lr: ...") or, a number given alone, by a rule naming the flag
        # (--lora-alpha without --lora)
        assert error.code == 2 and re.search(rf"{re.escape(flag)}\b", errors.getvalue())
        assert "Traceback" not in errors.getvalue()
    else:
        assert pattern.fullmatch(text.strip(" \t")), f"{flag} {text!r} was accepted"
        value = next(getattr(s, dest) for s in groups(parsed) if hasattr(s, dest))
        assert value == (int(text) if kind == "N" else float(text))


# A course file from a grammar of rows: good ones, and each structural fault a CSV can have. Every good
# row must come back as an example, in order, with its label; every bad one must be skipped naming its
# line (fatal under strict, at the first one); the file-level faults are DataFileErrors naming the file.
GOOD, BAD = "good", "bad"
row_kinds = st.sampled_from([
    (GOOD, "plain"), (GOOD, "quoted"), (GOOD, "nul"), (GOOD, "spaces"), (GOOD, "long"),
    (BAD, "label"), (BAD, "empty-id"), (BAD, "empty-sentence"), (BAD, "fields-missing"), (BAD, "extra-field"),
    (BAD, "duplicate-id"), (BAD, "blank-line")])
bad_labels = number_text.filter(lambda t: not (ASCII_INTEGER.fullmatch(t.strip(" \t"))
                                              and int(float(t)) in range(5)) and t.strip() != ""
                                and "\t" not in t and "\x00" not in t)


def course_row(n: int, kind: str, label: int, bad_label: str) -> tuple[str, str | None]:
    """(the row's text, the sentence it must read back as, or None for a row that must be skipped)."""
    sentence = {"plain": f" Film {n} is fine .", "quoted": f'" He said ""{n}"" ."', "nul": f" A\x00B {n} .",
                "spaces": f"   Spaced {n} .  ", "long": " long" * 30_000}.get(kind, f" Film {n} .")
    read_back = {"quoted": f'He said "{n}" .'}.get(kind, sentence.strip())
    fields = [str(n), f"id{n}", sentence, str(label)]
    bad = {"label": fields[:3] + [bad_label], "empty-id": [str(n), " ", sentence, str(label)],
           "empty-sentence": [str(n), f"id{n}", " ", str(label)], "fields-missing": fields[:3],
           "extra-field": fields + ["x"], "duplicate-id": [str(n), "id0", sentence, str(label)]}
    if kind == "blank-line":
        return "", None
    return "\t".join(bad.get(kind, fields)), (None if kind in bad else read_back)


@BOUNDARY
@given(kinds=st.lists(row_kinds, min_size=1, max_size=8), labels=st.lists(st.integers(0, 4), min_size=8,
                                                                            max_size=8),
       bad_label=bad_labels, bom=st.booleans(), crlf=st.booleans(), truncated=st.booleans(),
       strict=st.booleans())
def test_a_course_file_with_any_structural_fault_reads_its_good_rows_and_names_each_bad_line(
        tmp_path_factory, kinds, labels, bad_label, bom, crlf, truncated, strict):
    kinds = [(GOOD, "plain")] + kinds  # row 0 first, so "duplicate-id" has an id0 to repeat
    rows = [course_row(n, kind, labels[n % 8], bad_label) for n, (_, kind) in enumerate(kinds)]
    lines = ["\tid\tsentence\tsentiment"] + [text for text, _ in rows]
    if truncated:  # cut inside an opening quote, as a copy that stopped half-way leaves it
        lines.append(f'{len(rows)}\tidT\t"half a sent')
    newline = "\r\n" if crlf else "\n"
    content = ("\ufeff" if bom else "") + newline.join(lines) + ("" if truncated else newline)
    path = tmp_path_factory.mktemp("grammar") / "ids-sst-train.csv"
    path.write_bytes(content.encode("utf-8"))
    expected = [(f"id{n}", sentence, labels[n % 8]) for n, (_, sentence) in enumerate(rows) if sentence]
    bad_lines = [n + 2 for n, (_, sentence) in enumerate(rows) if sentence is None]  # a blank line too
    bad_lines += [len(rows) + 2] if truncated else []
    try:
        result = read_task("sst", path, strict=strict)
    except MalformedRowError as error:
        assert strict and bad_lines and error.line == bad_lines[0] and str(path) in str(error)
        return
    assert not (strict and bad_lines)
    assert [(e.id, e.sentence, e.label) for e in result.examples] == expected
    assert [row.line for row in result.skipped] == bad_lines


# Files that are not what a reader expects: each reader returns examples or raises an error naming the file.
file_faults = st.sampled_from(["missing", "empty", "blank", "binary", "latin-1", "utf-16", "folder",
                               "truncated", "unreadable", "dangling-link", "header-only"])
GOOD_FILES = {"sst": "\tid\tsentence\tsentiment\n0\ta\t Café is fine .\t3\n1\tb\t Good .\t4\n",
              "conll": "Café\tB-location\nis\tO\n\nfine\tO\n", "text": "Café is fine. It is.\n\nA second one.\n"}


@BOUNDARY
@given(fault=file_faults, reader=st.sampled_from(sorted(GOOD_FILES)), cut=st.integers(1, 40))
def test_a_file_fault_is_an_error_naming_the_file_never_another_exception(tmp_path_factory, fault, reader,
                                                                          cut):
    folder = tmp_path_factory.mktemp("faults")
    path = folder / f"input.{reader}"
    good = GOOD_FILES[reader].encode("utf-8")
    content = {"empty": b"", "blank": b"\n \n\t\n", "binary": bytes(range(256)),
               "latin-1": GOOD_FILES[reader].encode("latin-1"), "utf-16": GOOD_FILES[reader].encode("utf-16"),
               "truncated": good[:cut], "header-only": good.split(b"\n")[0] + b"\n"}.get(fault, good)
    if fault == "folder":
        path.mkdir()
    elif fault == "dangling-link":
        path.symlink_to(folder / "nowhere")
    elif fault != "missing":
        path.write_bytes(content)
    read = {"sst": lambda: read_task("sst", path).examples, "conll": lambda: read_conll(path),
            "text": lambda: read_text_documents(path)}[reader]
    with contextlib.ExitStack() as stack:
        if fault == "unreadable":  # as root chmod 000 still reads: the refusal is simulated, the same errno
            def refuse(self):
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            stack.enter_context(pytest.MonkeyPatch.context()).setattr(Path, "read_bytes", refuse)
        try:
            examples = read()
        except (DataFileError, FileNotFoundError) as error:
            assert str(path) in str(error)
            if fault == "unreadable":
                assert "cannot read" in str(error)
            return
    # what a reader returns is read from the file; a file without text may give nothing (the job then
    # says its data is empty), a file of other bytes never gives rows
    assert examples or fault in ("empty", "blank", "truncated", "header-only")
    assert fault not in ("missing", "folder", "dangling-link", "unreadable", "binary", "utf-16")


@BOUNDARY
@given(content=st.binary(min_size=1, max_size=200), change=st.sampled_from(["flip", "cut", "append", "same"]),
       at=st.integers(0, 199))
def test_a_run_folder_notices_any_change_to_an_input_and_no_other(tmp_path_factory, content, change, at):
    """inputs.py: a changed byte, a shorter or a longer file is named on --resume; the same bytes (moved
    elsewhere too) are not a change."""
    folder = tmp_path_factory.mktemp("inputs")
    path = folder / "train.csv"
    path.write_bytes(content)
    saved = [fingerprint(path)]
    at %= len(content)
    changed = {"flip": content[:at] + bytes([content[at] ^ 1]) + content[at + 1:], "cut": content[:at],
               "append": content + b"\n", "same": content}[change]
    moved = folder / "elsewhere.csv"
    moved.write_bytes(changed)
    message = first_change(saved, [fingerprint(moved)], "data file")
    assert (message is None) == (change == "same")
    if message:
        assert str(moved) in message and str(path) in message

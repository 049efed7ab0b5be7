"""Readers of the small classification sets: row counts of the shared files (their SOURCE.txt) and crafted
bad files."""

from __future__ import annotations

from collections import Counter

import pytest

from tasks.data.examples import DataFileError, MalformedRowError, PairExample, SentenceExample
from tasks.data.glue import read_glue, read_trec, trec_split

# SOURCE.txt counts (train, dev) and the share of label 1 in train
SHARED = {"cola": (8551, 1043, 6023), "mrpc": (3668, 408, 2474), "rte": (2490, 277, 1241),
          "wnli": (635, 71, 312), "sst2": (67349, 872, 37569)}


@pytest.mark.data
@pytest.mark.parametrize("task", sorted(SHARED))
def test_shared_glue_files_read_whole(data_dir, task):
    train, dev = read_glue(data_dir / "glue", task, "train"), read_glue(data_dir / "glue", task, "dev")
    n_train, n_dev, ones = SHARED[task]
    assert (len(train), len(dev)) == (n_train, n_dev) and not train.skipped and not dev.skipped
    assert Counter(e.label for e in train)[1] == ones
    pair = task in ("mrpc", "rte", "wnli")
    assert all(isinstance(e, PairExample if pair else SentenceExample) for e in train)


@pytest.mark.data
def test_rte_row_that_starts_with_a_quote_is_read_verbatim(data_dir):
    rows = read_glue(data_dir / "glue", "rte", "train").examples
    assert rows[2164].sentence1.startswith('"')


@pytest.mark.data
def test_shared_trec_file_and_its_split(data_dir):
    examples, skipped = read_trec(data_dir / "trec" / "train_5500.label")
    assert len(examples) == 5452 and not skipped
    assert len({e.coarse for e in examples}) == 6 and len({e.fine for e in examples}) == 50
    assert any("\xf0" in e.sentence for e in examples)  # the stray latin-1 byte, kept
    train, dev = trec_split(examples, 0.1, seed=0)
    assert len(train) + len(dev) == 5452 and not {e.id for e in train} & {e.id for e in dev}
    assert 500 < len(dev) < 600 and trec_split(examples, 0.1, seed=0) == (train, dev)


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def test_bad_glue_rows_are_reported_with_their_line_and_fatal_when_strict(tmp_path):
    write(tmp_path / "RTE" / "train.tsv",
          "index\tsentence1\tsentence2\tlabel\n0\t\"Quoted start\tB.\tentailment\n"
          "1\tA.\tB.\tmaybe\n2\tA.\n")
    result = read_glue(tmp_path, "rte", "train")
    assert [e.sentence1 for e in result] == ['"Quoted start']
    assert [(r.line, r.reason.split(" ")[0]) for r in result.skipped] == [(3, "label"), (4, "expected")]
    with pytest.raises(MalformedRowError, match=r"train.tsv:3: label 'maybe'"):
        read_glue(tmp_path, "rte", "train", strict=True)


def test_wrong_header_missing_and_empty_files_are_errors(tmp_path):
    write(tmp_path / "SST-2" / "train.tsv", "text\tlabel\nfine\t1\n")
    with pytest.raises(DataFileError, match=r"train.tsv:1: expected the header"):
        read_glue(tmp_path, "sst2", "train")
    write(tmp_path / "SST-2" / "dev.tsv", "")
    with pytest.raises(DataFileError, match="empty"):
        read_glue(tmp_path, "sst2", "dev")
    with pytest.raises(FileNotFoundError, match="MRPC/train.tsv"):
        read_glue(tmp_path, "mrpc", "train")
    with pytest.raises(ValueError, match="unknown GLUE task"):
        read_glue(tmp_path, "qnli", "train")


def test_mrpc_byte_order_mark_is_tolerated(tmp_path):
    write(tmp_path / "MRPC" / "dev.tsv",
          "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA.\tB.\n")
    assert read_glue(tmp_path, "mrpc", "dev").examples[0].label == 1


def test_trec_bad_lines(tmp_path):
    path = write(tmp_path / "t.label", "DESC:manner How ?\nnot a label\nNUM:date \n", encoding="latin-1")
    examples, skipped = read_trec(path)
    assert [e.fine for e in examples] == ["DESC:manner"] and [s.line for s in skipped] == [2, 3]
    with pytest.raises(MalformedRowError, match=r"t.label:2"):
        read_trec(path, strict=True)

"""Tagging: the CoNLL reader (WNUT-17's quirk, malformed input by file and line), the word <-> piece alignment
on tricky tokens, span enumeration and decoding (a nested entity), and python -m tasks.tag with each method on
a tiny model. The CRF is tested in test_crf.py, the entity scorer in test_entities.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from minbert.text.tokenizer import BertTokenizer
from tasks import tag
from tasks.data.conll import WNUT17_TYPES, Sentence, bio_tags, read_conll, write_conll
from tasks.data.examples import DataFileError
from tasks.data.wordpieces import (IGNORE, encode_words, piece_labels, word_index, word_predictions,
                                   word_vectors)
from tasks.evaluation.entities import bio_entities
from tasks.models.spans import NULL, SpanClassifier, decode_spans, enumerate_spans, span_labels

TAGS = bio_tags(WNUT17_TYPES)


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir) -> BertTokenizer:
    return BertTokenizer.from_pretrained(embedded_model_dir)


# ----- CoNLL ---------------------------------------------------------------------------------------


def test_whitespace_only_lines_separate_sentences(tmp_path):
    path = tmp_path / "a.conll"
    path.write_text("Empire\tB-location\nState\tI-location\n\t\nhi\tO\n\n\nthere\tO\n", encoding="utf-8")
    sentences = read_conll(path, TAGS)
    assert [s.tokens for s in sentences] == [("Empire", "State"), ("hi",), ("there",)]
    assert [s.line for s in sentences] == [1, 4, 7] and sentences[0].tags == ("B-location", "I-location")


@pytest.mark.parametrize("content, message", [
    ("a\tO\nb\n", r"a\.conll:2: expected 'token<TAB>tag', got 'b' \(no tag\)"),
    ("a\tO\nb\tB-persn\n", r"a\.conll:2: unknown tag 'B-persn'"),
    ("a\tO\nb\tI-person\n", r"a\.conll:2: I-person does not continue an entity of its type"),
    ("a\tB-group\nb\tI-person\n", r"a\.conll:2: I-person does not continue"),
    ("b\tI-person\n", r"a\.conll:1: I-person does not continue an entity of its type \(the previous tag "
                      r"is the sentence start\)"),
    ("\n\t\n", r"a\.conll: no sentences"),
])
def test_malformed_conll_is_reported_with_file_and_line(tmp_path, content, message):
    path = tmp_path / "a.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFileError, match=message):
        read_conll(path, TAGS)


def test_write_conll_round_trips_with_gold_and_prediction(tmp_path):
    sentences = [Sentence(("New", "York"), ("B-location", "I-location"), 1), Sentence(("hi",), ("O",), 4)]
    write_conll(tmp_path / "p.conll", sentences, [["B-location", "O"], ["B-person"]])
    text = (tmp_path / "p.conll").read_text()
    assert text == "New\tB-location\tB-location\nYork\tI-location\tO\n\nhi\tO\tB-person\n"
    back = read_conll(tmp_path / "p.conll", TAGS, check_iob2=False)  # the last column: the prediction
    assert [s.tags for s in back] == [("B-location", "O"), ("B-person",)]


@pytest.mark.data
def test_shared_wnut17_counts(data_dir):
    train = read_conll(data_dir / tag.TRAIN_FILE, TAGS)
    dev = read_conll(data_dir / tag.DEV_FILE, TAGS)
    assert (len(train), len(dev)) == (3394, 1009)  # SOURCE.txt
    assert sum(len(s.tokens) for s in train) == 62730 and sum(len(s.tokens) for s in dev) == 15733
    assert (sum(len(bio_entities(s.tags)) for s in train) == 1975
            and sum(len(bio_entities(s.tags)) for s in dev) == 836)


# ----- word pieces ---------------------------------------------------------------------------------

TRICKY = ["@paulwalk", "http://t.co/x7Yq", "😂", "#blessed", "supercalifragilistic", "&", "gt", ";",
          "\u200b", "Zürich"]


def test_piece_labels_round_trip_to_word_tags_on_tricky_tokens(tokenizer):
    ids, word_ids = encode_words(tokenizer, TRICKY, 128)
    # every word has a piece
    assert sorted(set(w for w in word_ids if w is not None)) == list(range(len(TRICKY)))
    assert ids[word_ids.index(8)] == tokenizer.unk_token_id  # the zero-width space gives no piece: [UNK]
    assert len([w for w in word_ids if w == 4]) > 2  # a word split into many pieces
    tags = [1, 2, 0, 3, 4, 0, 0, 0, 5, 6]
    for all_pieces in (True, False):
        labels = piece_labels(tags, word_ids, all_pieces)
        assert labels[0] == labels[-1] == IGNORE
        scores = torch.full((len(ids), 13), -5.0)
        for t, label in enumerate(labels):
            if label != IGNORE:
                scores[t, label] = 5.0
        for how in ("first", "mean"):
            assert word_predictions(scores, word_ids, len(TRICKY), how) == tags
        if not all_pieces:  # later pieces are ignored
            assert sum(label != IGNORE for label in labels) == len(TRICKY)


def test_word_vectors_first_piece_and_mean_of_pieces():
    pieces = torch.tensor([[[0.0], [1.0], [2.0], [4.0], [8.0], [0.0]]])  # [CLS] w0 w1 w1 w1 [SEP]
    index = torch.tensor([word_index([None, 0, 1, 1, 1, None], 6)])
    first, present = word_vectors(pieces, index, 3, "first")
    assert first[0, :, 0].tolist() == [1.0, 2.0, 0.0] and present.tolist() == [[True, True, False]]
    mean, _ = word_vectors(pieces, index, 3, "mean")
    assert mean[0, :, 0].tolist() == pytest.approx([1.0, 14 / 3, 0.0])


def test_words_beyond_the_window_are_left_out_whole_and_predicted_o(tokenizer):
    words = ["hello"] * 10
    ids, word_ids = encode_words(tokenizer, words, 6)  # [CLS] + 4 words + [SEP]
    assert len(ids) == 6 and word_ids[-2] == 3
    scores = torch.zeros(6, 13)
    scores[1:5, 3] = 1.0
    assert word_predictions(scores, word_ids, 10, "first") == [3, 3, 3, 3] + [0] * 6


# ----- spans -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, width", [(1, 8), (5, 1), (5, 3), (10, 8), (3, 10)])
def test_span_enumeration_counts(n, width):
    spans = enumerate_spans(n, width)
    limit = min(width, n)
    assert len(spans) == sum(n - w + 1 for w in range(1, limit + 1))  # n - w + 1 spans of each width w
    assert len(set(spans)) == len(spans) and all(1 <= e - s <= width and 0 <= s < e <= n for s, e in spans)


def test_a_nested_entity_is_kept_by_nested_decoding_and_impossible_in_bio():
    # "Bank of America" (corporation) contains "America" (location).
    words = ["I", "use", "Bank", "of", "America"]
    types = ["corporation", "location"]
    spans = enumerate_spans(len(words), 4)
    gold = [("corporation", 2, 5), ("location", 4, 5)]
    labels = span_labels(spans, gold, types)
    assert labels[spans.index((2, 5))] == 1 and labels[spans.index((4, 5))] == 2
    assert sum(label != NULL for label in labels) == 2  # both are training targets
    probabilities = torch.full((len(spans), 3), 0.0)
    probabilities[:, NULL] = 1.0
    probabilities[spans.index((2, 5))] = torch.tensor([0.1, 0.9, 0.0])
    probabilities[spans.index((4, 5))] = torch.tensor([0.2, 0.0, 0.8])
    probabilities[spans.index((1, 3))] = torch.tensor([0.4, 0.6, 0.0])  # "use Bank": crosses (2, 5)
    assert decode_spans(probabilities, spans, types, nested=True) == gold  # the crossing span is refused
    assert decode_spans(probabilities, spans, types, nested=False) == [("corporation", 2, 5)]
    bio_tags_of_the_words = ["O", "O", "B-corporation", "I-corporation", "I-corporation"]
    assert ("location", 4, 5) not in bio_entities(bio_tags_of_the_words)  # one tag per word: no room for it


def test_span_classifier_shapes_and_attention_pooling_stays_inside_the_span():
    torch.manual_seed(0)
    words = torch.randn(2, 5, 16)
    spans = torch.tensor([enumerate_spans(5, 2)[:6], enumerate_spans(5, 2)[3:9]])  # (2, 6, 2)
    for pooling in ("mean", "attention"):
        head = SpanClassifier(16, 3, pooling, dropout=0.0).eval()
        logits = head(words, spans)
        assert logits.shape == (2, 6, 4)
        changed = words.clone()
        changed[0, 4] += 100.0  # a word outside the first span (0, 1)
        assert torch.allclose(head(changed, spans)[0, 0], logits[0, 0])


# ----- the job ---------------------------------------------------------------------------------------

SENTENCES = [
    [("I", "O"), ("love", "O"), ("New", "B-location"), ("York", "I-location")],
    [("@paulwalk", "B-person"), ("uses", "O"), ("Windows", "B-product"), ("😂", "O")],
    [("Bank", "B-corporation"), ("of", "I-corporation"), ("America", "I-corporation"), ("rocks", "O")],
    [("see", "O"), ("http://t.co/x", "O"), ("#blessed", "O")],
]


@pytest.fixture(scope="module")
def wnut_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    (root / "wnut17").mkdir()
    text = "\n".join("".join(f"{w}\t{t}\n" for w, t in s) for s in SENTENCES * 4)
    (root / tag.TRAIN_FILE).write_text(text.replace("\n\n", "\n\t\n", 3), encoding="utf-8")  # the TAB quirk
    (root / tag.DEV_FILE).write_text("\n".join("".join(f"{w}\t{t}\n" for w, t in s) for s in SENTENCES),
                                     encoding="utf-8")
    return root


def tag_args(tiny_model_dir, root, out, *extra):
    return ["--model", str(tiny_model_dir), "--data-dir", str(root), "--out", str(out), "--batch_size", "4",
            "--epochs", "2", "--max-length", "32", *extra]


@pytest.mark.parametrize("method, extra", [("bio", ["--label-pieces", "first", "--word-decoding", "mean"]),
                                           ("bio-crf", []),
                                           ("span", ["--span-pooling", "attention", "--nested"])])
def test_each_method_runs_and_writes_conll_predictions_and_a_report(tiny_model_dir, wnut_root, tmp_path,
                                                                     method, extra, capsys):
    tokens_only = tmp_path / "tweets.conll"
    long = "".join(f"word{i}\n" for i in range(40))  # past the 32-piece window: a note, the rest written O
    tokens_only.write_text(f"hello\nworld\n\nBank\nof\nAmerica\n\n{long}", encoding="utf-8")
    out = tmp_path / method
    assert tag.main(tag_args(tiny_model_dir, wnut_root, out, "--method", method, "--predict",
                             str(tokens_only), *extra)) == 0
    dev = read_conll(out / "predictions" / "dev.conll", TAGS, check_iob2=False)  # token, gold, predicted
    assert [s.tokens for s in dev] == [tuple(w for w, _ in s) for s in SENTENCES]
    lines = (out / "predictions" / "dev.conll").read_text().splitlines()
    assert lines[2].split("\t")[:2] == ["New", "B-location"] and len(lines[2].split("\t")) == 3
    tweets = (out / "predictions" / "tweets.conll").read_text().split("\n\n")
    assert len(tweets) == 3 and all(len(line.split("\t")) == 2 for line in tweets[0].splitlines())
    assert len(tweets[2].splitlines()) == 40
    assert "note: tweets.conll: " in capsys.readouterr().err
    report = (out / "report.txt").read_text()
    assert "micro" in report and ("SPURIOUS" in report or "MISSED" in report)
    result = json.loads((out / "result.json").read_text())
    assert result["method"] == method and 0 <= result["best"]["f1"] <= 1
    assert "f1_person" in result["final"]


@pytest.mark.parametrize("flags, message", [
    (["--method", "span", "--label-pieces", "first"], "--label-pieces applies to --method bio"),
    (["--method", "bio", "--nested"], "--nested and --span-pooling apply to --method span"),
    (["--method", "span", "--max-span-width", "0"], "argument --max-span-width: must be an integer >= 1"),
])
def test_contradictory_flags(tiny_model_dir, wnut_root, tmp_path, flags, message, capsys):
    with pytest.raises(SystemExit) as error:
        tag.main(tag_args(tiny_model_dir, wnut_root, tmp_path / "run", *flags))
    assert error.value.code == 2 and message in capsys.readouterr().err


def test_a_malformed_training_file_is_one_line_naming_file_and_line(tiny_model_dir, wnut_root, tmp_path):
    broken = tmp_path / "data"
    (broken / "wnut17").mkdir(parents=True)
    (broken / tag.TRAIN_FILE).write_text("a\tO\nb\tI-person\n", encoding="utf-8")
    (broken / tag.DEV_FILE).write_text("a\tO\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"error: .*wnut17train.conll:2: I-person does not continue"):
        tag.main(tag_args(tiny_model_dir, broken, tmp_path / "run"))


def test_tagging_notebook_runs_on_a_tiny_run(tiny_model_dir, wnut_root, tmp_path, run_notebook):
    assert tag.main(tag_args(tiny_model_dir, wnut_root, tmp_path / "run", "--epochs", "1")) == 0
    outputs = run_notebook("tagging.ipynb", {"MINBERT_TAG_RUN": str(tmp_path / "run")})
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 2
    assert "method bio" in "".join(o.get("text", "") for o in outputs)



def test_predict_files_are_read_before_training_and_words_past_the_window_get_a_note(
        tiny_model_dir, wnut_root, tmp_path, capsys):
    """A --predict file is an input like the training data: a broken one stops the job before it trains (no
    run folder left). (Words the window cuts get a note, as for the dev set:
    test_each_method_runs_and_writes_conll_predictions_and_a_report.)"""
    broken = tmp_path / "broken.conll"
    broken.write_bytes("café\tO\n".encode("latin-1"))
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match=r"error: .*broken.conll:1: not UTF-8"):
        tag.main(tag_args(tiny_model_dir, wnut_root, out, "--predict", str(broken), "--max-steps", "1"))
    assert "epoch 1" not in capsys.readouterr().err and not out.exists()

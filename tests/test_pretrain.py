"""Further pre-training: masking statistics, next-sentence examples, losses against transformers, and
`python -m pretrain.run` end to end on a tiny model.

Tolerances: masking shares on ~100k maskable tokens have a standard error below 0.002 (15% rate) and
0.003 (80/10/10 within ~15k masked), so we allow 0.01; span lengths on 100k draws, 0.005 per length.
"""

from __future__ import annotations

import io
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import pytest
import torch
import transformers

from minbert.config import BertConfig
from minbert.heads import BertForPreTraining
from minbert.model import BertModel
from minbert.sentence_encoder import SentenceEncoder
from minbert.text.tokenizer import BertTokenizer
from pretrain import run as pretrain_run
from pretrain.corpus import (IS_NEXT, NO_NSP_LABEL, NOT_NEXT, create_examples, newsgroups_documents,
                             read_text_documents, split_heldout, split_sentences, truncate_pair)
from minbert.masking import (IGNORE_INDEX, MaskingVocab, choose_replacement, mask_tokens, maskable_units,
                              number_to_predict, sample_span_length, span_mask)
from pretrain.run import PretrainingBatch, PretrainingModel, collate
from pretrain.span_boundary import SpanBoundaryHead, span_targets
from tasks import multitask
from tasks.data.sources import SAMPLE_DIR

REPO = Path(__file__).resolve().parents[1]

# The embedded and tiny checkpoints have no pre-training heads: from_pretrained warns, and the run says so
# (checked below).
pytestmark = pytest.mark.filterwarnings("ignore:.*freshly initialised.*:UserWarning")

CLS, SEP, PAD, MASK = 101, 102, 0, 103
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def vocab(embedded_model_dir) -> MaskingVocab:
    return MaskingVocab.from_tokenizer(BertTokenizer.from_pretrained(embedded_model_dir))


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir) -> BertTokenizer:
    return BertTokenizer.from_pretrained(embedded_model_dir)


def random_sequences(n: int, length: int, seed: int = 0) -> list[list[int]]:
    """[CLS] ... [SEP] ... [SEP] [PAD] [PAD]: ordinary word ids (1996..29611) between the specials."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        body = [rng.randrange(1996, 29612) for _ in range(length)]
        half = length // 2
        out.append([CLS] + body[:half] + [SEP] + body[half:] + [SEP, PAD, PAD])
    return out


# ----- masking ------------------------------------------------------------------------------------


def test_masking_vocab_knows_the_special_and_continuation_pieces(vocab, tokenizer):
    assert vocab.mask_id == MASK and {CLS, SEP, PAD, MASK, 100} <= vocab.special_ids
    assert vocab.is_continuation[tokenizer.convert_tokens_to_ids(["##ing"])[0]]
    assert not vocab.is_continuation[tokenizer.convert_tokens_to_ids(["the"])[0]]
    rng = random.Random(0)
    assert all(vocab.random_token(rng) not in vocab.special_ids for _ in range(2000))


def test_token_masking_statistics_on_100k_tokens(vocab):
    rng = random.Random(1)
    maskable = chosen = as_mask = as_random = as_kept = 0
    for ids in random_sequences(800, 126):  # 800 x 126 = 100,800 maskable tokens
        out = mask_tokens(ids, vocab, rng)
        maskable += sum(1 for t in ids if t not in vocab.special_ids)
        for position, (original, seen, label) in enumerate(zip(ids, out.input_ids, out.labels)):
            if original in vocab.special_ids:
                assert label == IGNORE_INDEX and seen == original, "a special token or padding was masked"
                continue
            if label == IGNORE_INDEX:
                assert seen == original
                continue
            assert label == original
            chosen += 1
            as_mask += seen == MASK
            as_kept += seen == original
            as_random += seen not in (MASK, original)
    assert maskable >= 100_000
    assert abs(chosen / maskable - 0.15) < 0.01
    assert abs(as_mask / chosen - 0.8) < 0.01
    assert abs(as_random / chosen - 0.1) < 0.01
    assert abs(as_kept / chosen - 0.1) < 0.01


def test_masking_budget_is_rounded_capped_and_at_least_one(vocab):
    rng = random.Random(0)
    long = random_sequences(1, 400)[0]
    assert number_to_predict(long, vocab, 0.15, 20) == 20
    assert sum(label != IGNORE_INDEX for label in mask_tokens(long, vocab, rng).labels) == 20
    short = [CLS, 2023, SEP]
    assert sum(label != IGNORE_INDEX for label in mask_tokens(short, vocab, rng).labels) == 1
    assert number_to_predict([CLS, SEP, PAD], vocab, 0.15, 20) == 0
    assert mask_tokens([CLS, SEP], vocab, rng).labels == [IGNORE_INDEX, IGNORE_INDEX]


def test_replacement_rule_is_80_10_10():
    rng = random.Random(0)
    counts = Counter(choose_replacement(rng) for _ in range(100_000))
    assert abs(counts["mask"] / 1e5 - 0.8) < 0.01
    assert abs(counts["random"] / 1e5 - 0.1) < 0.01
    assert abs(counts["keep"] / 1e5 - 0.1) < 0.01


def sentence_ids(tokenizer, n: int = 300, seed: int = 0) -> list[list[int]]:
    """Real sentences with many multi-piece words, as [CLS] A [SEP] B [SEP]."""
    words = ("unbelievably photosynthesis tokenization the cat sat on embeddings transformers "
             "preprocessing hyperparameters a mat of unaffordable wordpieces").split()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a = tokenizer.encode_example(" ".join(rng.choice(words) for _ in range(12)),
                                     " ".join(rng.choice(words) for _ in range(12)), max_length=128)
        out.append(a.input_ids)
    return out


def words_of(ids, vocab) -> list[list[int]]:
    return maskable_units(ids, vocab, whole_word=True)


def test_whole_word_masking_keeps_words_whole(vocab, tokenizer):
    rng = random.Random(2)
    multi_piece_words = 0
    for ids in sentence_ids(tokenizer):
        out = mask_tokens(ids, vocab, rng, whole_word=True)
        for word in words_of(ids, vocab):
            chosen = {out.labels[p] != IGNORE_INDEX for p in word}
            assert len(chosen) == 1, f"word at {word} partly masked"
            multi_piece_words += len(word) > 1
    assert multi_piece_words > 1000


def test_span_masking_takes_whole_words_within_segments_and_spans_never_touch(vocab, tokenizer):
    rng = random.Random(3)
    for ids in sentence_ids(tokenizer):
        out = span_mask(ids, vocab, rng)
        chosen = [p for p, label in enumerate(out.labels) if label != IGNORE_INDEX]
        assert 0 < len(chosen) <= number_to_predict(ids, vocab, 0.15, 20)
        assert sorted(p for s, e in out.spans for p in range(s, e + 1)) == chosen
        for word in words_of(ids, vocab):
            assert len({out.labels[p] != IGNORE_INDEX for p in word}) == 1
        for start, end in out.spans:
            assert all(ids[p] not in vocab.special_ids for p in range(start, end + 1)), "span crosses [SEP]"
            assert out.labels[start - 1] == IGNORE_INDEX and out.labels[end + 1] == IGNORE_INDEX
            seen = [out.input_ids[p] for p in range(start, end + 1)]
            originals = ids[start:end + 1]
            # one 80/10/10 decision per span: all [MASK], all kept, or all replaced
            assert (all(t == MASK for t in seen) or seen == originals
                    or all(t != MASK for t in seen)), (seen, originals)


def test_span_lengths_follow_the_clipped_geometric_distribution():
    rng = random.Random(4)
    draws = Counter(sample_span_length(rng) for _ in range(100_000))
    weights = [0.2 * 0.8 ** (k - 1) for k in range(1, 11)]
    for length in range(1, 11):
        assert abs(draws[length] / 1e5 - weights[length - 1] / sum(weights)) < 0.005, length
    assert set(draws) <= set(range(1, 11))
    mean = sum(k * n for k, n in draws.items()) / 1e5
    assert abs(mean - 3.8) < 0.05  # SpanBERT §3.1: "mean span length = 3.8"


def test_realised_span_lengths_in_words_match_on_long_texts(vocab):
    """With room to spare (long sequences, large budget) the spans' word counts follow the draws."""
    rng = random.Random(5)
    lengths = Counter()
    for ids in random_sequences(300, 1000):
        for start, end in span_mask(ids, vocab, rng, max_predictions=150).spans:
            lengths[end - start + 1] += 1  # one piece per word here
    total = sum(lengths.values())
    weights = [0.2 * 0.8 ** (k - 1) for k in range(1, 11)]
    for length in (1, 2, 3):
        assert abs(lengths[length] / total - weights[length - 1] / sum(weights)) < 0.03


# ----- corpus and next-sentence examples --------------------------------------------------------


def test_split_sentences_worked_examples():
    assert split_sentences("It rained. We stayed in! Did you? Yes.") == ["It rained.", "We stayed in!",
                                                                          "Did you?", "Yes."]
    assert split_sentences("Dr. Smith met J. Doe at 5 p.m. Then they left.") == [
        "Dr. Smith met J. Doe at 5 p.m. Then they left."]  # known abbreviation before a capital: no split
    assert split_sentences('He said "stop." Then he left.') == ['He said "stop."', "Then he left."]
    assert split_sentences("e.g. this one. and that") == ["e.g. this one. and that"]
    assert split_sentences("   ") == []


def test_text_files_blank_lines_separate_documents(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("One. Two.\nThree.\n\n\nFour.\n\nFive. Six.\n", encoding="utf-8")
    assert read_text_documents(path) == [["One.", "Two.", "Three."], ["Four."], ["Five.", "Six."]]


def test_wikitext_documents_are_articles(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text(" = Alpha = \n\n A first . It goes on . \n\n = = Section = = \n\n More text . \n"
                    " = Beta = \n\n Second article . \n", encoding="utf-8")
    docs = read_text_documents(path, "wikitext")
    assert len(docs) == 2 and docs[1] == ["Second article ."]
    assert docs[0][-1] == "More text ."


def test_bad_text_file_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\n\xff\xfe broken\n")
    with pytest.raises(ValueError, match=r"bad.txt:3: not UTF-8"):
        read_text_documents(path)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_text_documents(tmp_path / "nope.txt")


def test_newsgroups_posts_lose_headers_and_quoted_replies(tmp_path):
    archive = tmp_path / "20news-bydate.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in [("20news-bydate-train/sci.space/1", "From: a@b\nSubject: x\n\nOrbits are fun. "
                            "Really fun.\n> quoted line\n\nSecond paragraph."),
                           ("20news-bydate-test/sci.space/2", "From: c\n\nTest post.")]:
            data = text.encode("latin-1")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert newsgroups_documents(archive, "train") == [["Orbits are fun.", "Really fun.", "Second paragraph."]]
    assert newsgroups_documents(archive, "test") == [["Test post."]]


def coded_documents(n_docs: int, n_sentences: int) -> list[list[list[int]]]:
    """Sentence s of document d is [1000 + 100 d + s] * 3, so any piece says where it came from."""
    return [[[1000 + 100 * d + s] * 3 for s in range(n_sentences)] for d in range(n_docs)]


def origin(token: int) -> tuple[int, int]:
    return (token - 1000) // 100, (token - 1000) % 100


def test_nsp_labels_are_balanced_and_actual_next_segments_are_adjacent():
    documents = coded_documents(200, 40)
    examples, stats = create_examples(documents, 32, random.Random(0), CLS, SEP)
    labels = Counter(e.next_sentence_label for e in examples)
    pairs = labels[IS_NEXT] + labels[NOT_NEXT]
    assert pairs > 1000 and abs(labels[NOT_NEXT] / pairs - 0.5) < 0.03
    assert stats.not_next == labels[NOT_NEXT]
    for e in examples:
        assert len(e.input_ids) <= 32 and e.input_ids[0] == CLS and e.input_ids[-1] == SEP
        if e.next_sentence_label == NO_NSP_LABEL:
            assert e.input_ids.count(SEP) == 1 and set(e.token_type_ids) == {0}
            continue
        first_sep = e.input_ids.index(SEP)
        a, b = e.input_ids[1:first_sep], e.input_ids[first_sep + 1:-1]
        assert e.token_type_ids == [0] * (first_sep + 1) + [1] * (len(b) + 1)
        (doc_a, last_a), (doc_b, first_b) = origin(a[-1]), origin(b[0])
        if e.next_sentence_label == IS_NEXT:
            # sentences are 3 pieces and a chunk overshoots the window by at most 2, so truncation never
            # removes a whole sentence: B starts exactly at the sentence after A's last one
            assert doc_a == doc_b and first_b == last_a + 1
        else:
            assert doc_b != doc_a


def test_one_sentence_documents_make_single_segment_examples():
    examples, stats = create_examples([[[5, 6, 7]], [[8, 9]], [[10]]], 16, random.Random(0), CLS, SEP)
    assert [e.input_ids for e in examples] == [[CLS, 5, 6, 7, SEP], [CLS, 8, 9, SEP], [CLS, 10, SEP]]
    assert all(e.next_sentence_label == NO_NSP_LABEL for e in examples) and stats.single_segment == 3


def test_long_sentences_are_truncated_and_empty_documents_skipped():
    documents = [[[7] * 300, [8] * 5], [], [[9] * 4, [10] * 4]]
    examples, stats = create_examples(documents, 64, random.Random(0), CLS, SEP, short_seq_prob=0.0)
    assert all(len(e.input_ids) <= 64 for e in examples)
    assert stats.truncated_pairs >= 1 and stats.skipped_empty_documents == 1


def test_nsp_needs_two_documents():
    with pytest.raises(ValueError, match="at least two non-empty documents"):
        create_examples([[[1, 2], [3, 4]]], 16, random.Random(0), CLS, SEP)
    examples, _ = create_examples([[[1, 2], [3, 4]]], 16, random.Random(0), CLS, SEP, nsp=False)
    assert examples[0].input_ids == [CLS, 1, 2, 3, 4, SEP]


def test_truncate_pair_cuts_the_longer_side_only():
    a, b = list(range(10)), list(range(100, 103))
    assert truncate_pair(a, b, 8, random.Random(0))
    assert len(a) == 5 and b == [100, 101, 102]
    assert set(a) <= set(range(10)) and a == sorted(a)


def test_heldout_split_is_deterministic_and_disjoint():
    docs = [[str(i)] for i in range(100)]
    train, heldout = split_heldout(docs, 0.1, seed=7)
    assert len(heldout) == 10 and len(train) == 90
    assert split_heldout(docs, 0.1, seed=7) == (train, heldout)
    assert not {d[0] for d in train} & {d[0] for d in heldout}


# ----- losses ---------------------------------------------------------------------------------------


def hf_copy(ours: BertForPreTraining) -> transformers.BertForPreTraining:
    fields = {k: v for k, v in ours.config.to_dict().items() if k not in ("architectures", "model_type")}
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**fields, attn_implementation="eager"))
    missing, unexpected = theirs.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all("decoder" in k or k.endswith("_ids") for k in missing)
    theirs.tie_weights()
    return theirs


@pytest.fixture
def tiny_pair():
    config = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ours = BertForPreTraining(config, attn_implementation="eager").eval()
    return ours, hf_copy(ours).eval()


def masked_batch(config, seed=0) -> tuple[PretrainingBatch, list]:
    """Four examples, two padded, one single-segment; real masking with a toy vocabulary."""
    vocab = MaskingVocab(mask_id=4, vocab_size=config.vocab_size, special_ids=frozenset({0, 1, 2, 3, 4}),
                         is_continuation=tuple(False for _ in range(config.vocab_size)))
    rng = random.Random(seed)
    from pretrain.corpus import PretrainingExample
    examples = []
    for n_a, n_b, label in [(5, 6, 0), (3, 4, 1), (7, 2, 1), (6, None, NO_NSP_LABEL)]:
        a = [rng.randrange(5, config.vocab_size) for _ in range(n_a)]
        ids, types = [2] + a + [3], [0] * (n_a + 2)
        if n_b:
            ids += [rng.randrange(5, config.vocab_size) for _ in range(n_b)] + [3]
            types += [1] * (n_b + 1)
        examples.append(PretrainingExample(ids, types, label))
    masked = [span_mask(e.input_ids, vocab, rng, mask_prob=0.3) for e in examples]
    return collate(examples, masked, pad_id=0), masked


def test_pretraining_loss_equals_transformers(tiny_pair):
    ours, theirs = tiny_pair
    batch, _ = masked_batch(ours.config)
    tokens, labels, nsp = batch.tokens, batch.labels, batch.next_sentence_labels
    pairs = nsp != NO_NSP_LABEL
    ref = theirs(input_ids=tokens.input_ids[pairs], attention_mask=tokens.attention_mask[pairs],
                 token_type_ids=tokens.token_type_ids[pairs], labels=labels[pairs],
                 next_sentence_label=nsp[pairs])
    # our BertForPreTraining.forward (all positions decoded), and the pre-training job's masked-only path
    out = ours(tokens.input_ids[pairs], tokens.attention_mask[pairs], tokens.token_type_ids[pairs],
               labels=labels[pairs], next_sentence_label=nsp[pairs])
    torch.testing.assert_close(out.loss, ref.loss, **TOL)
    fast = PretrainingModel(ours).losses(PretrainingBatch(
        type(tokens)(*(t[pairs] for t in tokens)), labels[pairs], nsp[pairs],
        span_targets([[]] * int(pairs.sum()))))
    torch.testing.assert_close(fast.loss, ref.loss, **TOL)
    # transformers has no NSP "ignore" for single segments (and no loss without NSP labels): our NSP loss
    # skips them, and the masked-LM loss over all rows equals the cross-entropy of transformers' logits
    logits = theirs(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                    token_type_ids=tokens.token_type_ids).prediction_logits
    mlm_all = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
    both = PretrainingModel(ours).losses(batch)
    torch.testing.assert_close(both.mlm_loss, mlm_all, **TOL)
    torch.testing.assert_close(both.loss, both.mlm_loss + both.nsp_loss)
    assert both.nsp_count == 3 and both.mlm_count == int((labels != IGNORE_INDEX).sum())


def test_switching_objectives_off_and_the_span_boundary_loss(tiny_pair):
    ours, _ = tiny_pair
    batch, masked = masked_batch(ours.config)
    only_mlm = PretrainingModel(ours, nsp=False).losses(batch)
    assert only_mlm.nsp_loss is None and torch.equal(only_mlm.loss, only_mlm.mlm_loss)
    only_nsp = PretrainingModel(ours, mlm=False).losses(batch)
    assert only_nsp.mlm_loss is None and torch.equal(only_nsp.loss, only_nsp.nsp_loss)
    head = SpanBoundaryHead(ours.config)
    with_sbo = PretrainingModel(ours, head).losses(batch)
    rows = batch.span_targets[0]
    assert rows.numel() == sum(e - s + 1 for m in masked for s, e in m.spans)
    torch.testing.assert_close(with_sbo.loss, with_sbo.mlm_loss + with_sbo.nsp_loss + with_sbo.sbo_loss)
    with_sbo.loss.backward()
    assert head.predictions.transform[0].weight.grad is not None and head.position_embeddings.weight.grad.abs().sum() > 0


def test_span_targets_point_at_the_boundaries():
    rows, left, right, offsets, positions = span_targets([[(2, 4)], [], [(1, 1), (5, 6)]])
    assert rows.tolist() == [0, 0, 0, 2, 2, 2]
    assert left.tolist() == [1, 1, 1, 0, 4, 4] and right.tolist() == [5, 5, 5, 2, 7, 7]
    assert offsets.tolist() == [0, 1, 2, 0, 0, 1] and positions.tolist() == [2, 3, 4, 1, 5, 6]


# ----- the command ----------------------------------------------------------------------------------


def corpus_file(tmp_path):
    """A small, very repetitive corpus: a tiny model can learn its masked words within a few steps."""
    rng = random.Random(0)
    animals = ["the cat sat on the mat .", "the dog sat on the rug .", "a bird sang in the tree ."]
    docs = ["\n".join(rng.choice(animals) for _ in range(6)) for _ in range(40)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def read_metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_tiny_pretraining_run_lowers_heldout_loss_and_saves_a_loadable_checkpoint(tiny_model_dir, tmp_path,
                                                                                 capsys):
    out = tmp_path / "run"
    args = ["--model", str(tiny_model_dir), "--text", str(corpus_file(tmp_path)), "--out", str(out),
            "--epochs", "4", "--batch-size", "8", "--lr", "1e-2", "--head-lr", "1e-2", "--heldout", "0.2",
            "--seed", "1"]
    assert pretrain_run.main(args) == 0
    err = capsys.readouterr().err
    assert "no pre-training heads" in err and "decoder is tied" in err
    history = read_metrics(out)
    assert history[0]["epoch"] == 0  # evaluated before training
    before, after = history[0]["dev"]["pretrain"], history[-1]["dev"]["pretrain"]
    assert after["mlm_perplexity"] < 0.01 * before["mlm_perplexity"]  # ~31,000 (uniform) -> ~20
    assert after["mlm_accuracy"] > before["mlm_accuracy"]
    for name in ("config.json", "loss_and_dev.png", "best/config.json", "best/model.safetensors",
                 "best/vocab.txt"):
        assert (out / name).is_file(), name
    assert not (out / "checkpoints").exists()  # a finished run drops its resume checkpoints
    # the checkpoint opens in transformers (with its pre-training heads) and in our jobs
    theirs = transformers.BertForPreTraining.from_pretrained(out / "best")
    ours, report = BertForPreTraining.from_pretrained(out / "best", return_report=True)
    assert not report.initialised
    torch.testing.assert_close(theirs.cls.seq_relationship.weight, ours.cls.seq_relationship.weight)
    encoder = BertModel.from_pretrained(out / "best")
    assert all(torch.equal(v, ours.bert.state_dict()[k]) for k, v in encoder.state_dict().items())
    sentences = SentenceEncoder(out / "best", device="cpu")  # the same folder, wherever a model folder opens
    assert all(torch.equal(v, sentences.model.state_dict()[k]) for k, v in encoder.state_dict().items())
    assert multitask.main(["--model", str(out / "best"), "--data-dir", str(SAMPLE_DIR), "--out",
                           str(tmp_path / "mt"), "--limit", "16", "--batch-size", "8", "--max-steps",
                           "1"]) == 0


def test_pretraining_from_a_masked_lm_checkpoint_keeps_its_trained_head(tiny_model_dir, tmp_path, capsys):
    torch.manual_seed(5)
    mlm = transformers.BertForMaskedLM(transformers.BertConfig.from_pretrained(tiny_model_dir))
    with torch.no_grad():
        for p in mlm.cls.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # trained, not BERT's initial values
    mlm.save_pretrained(tmp_path / "mlm")
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(tiny_model_dir / name, tmp_path / "mlm" / name)
    out = tmp_path / "run"
    assert pretrain_run.main(["--model", str(tmp_path / "mlm"), "--text", str(corpus_file(tmp_path)), "--out",
                              str(out), "--max-steps", "1", "--batch-size", "8", "--lr", "1e-9",
                              "--keep-checkpoints"]) == 0
    err = capsys.readouterr().err
    assert "has no next-sentence classifier: it starts fresh; the checkpoint's masked-LM head" in err
    # The heads learnt at --lr (1e-9), not at fresh heads' 1e-3: one step leaves the trained head as it was.
    trained = mlm.state_dict()
    last = torch.load(out / "checkpoints" / "last.pt", weights_only=True)["model"]
    for key in ("cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight",
                "cls.predictions.bias"):
        torch.testing.assert_close(last[key], trained[key], atol=1e-6, rtol=0, msg=key)


def test_pretraining_resumes_identically(tiny_model_dir, tmp_path):
    common = ["--model", str(tiny_model_dir), "--within", "multitask", "--data-dir", str(SAMPLE_DIR),
              "--limit", "20", "--epochs", "2", "--batch-size", "8", "--no-eval-first", "--masking",
              "whole-word", "--keep-checkpoints"]  # the final training states are compared
    straight, stopped = tmp_path / "a", tmp_path / "b"
    assert pretrain_run.main(common + ["--out", str(straight)]) == 0
    pretrain_run.main(common + ["--out", str(stopped), "--max-steps", "5"])
    assert pretrain_run.main(common + ["--out", str(stopped), "--resume"]) == 0
    a = torch.load(straight / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(stopped / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_span_masking_with_the_boundary_objective_runs(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    assert pretrain_run.main(["--model", str(tiny_model_dir), "--text", str(corpus_file(tmp_path)), "--out",
                              str(out), "--max-steps", "2", "--batch-size", "4", "--masking", "span",
                              "--span-boundary"]) == 0
    saved = BertForPreTraining.from_pretrained(out / "best").state_dict()
    assert not any("span_boundary" in k for k in saved)  # pre-training only, not part of the checkpoint


@pytest.mark.parametrize("flags, message", [
    (["--within", "sst", "--no-mlm", "--no-nsp"], "nothing to train"),
    (["--within", "sst", "--span-boundary"], "needs --masking span"),
    (["--within", "sst", "--no-mlm", "--masking", "span"], "no effect with --no-mlm"),
    (["--within", "sst", "--heldout", "0"], "argument --heldout: must be a number in (0, 1)"),
    (["--within", "sst", "--splits", "train,valid"],
     "argument --splits: must be a comma-separated list of train, dev, test"),
    ([], "no corpus"),
])
def test_contradictory_or_missing_flags_are_errors(tiny_model_dir, tmp_path, flags, message, capsys):
    with pytest.raises(SystemExit) as caught:
        pretrain_run.main(["--model", str(tiny_model_dir), "--out", str(tmp_path / "r"), *flags])
    assert message in str(caught.value) + capsys.readouterr().err


def documents_file(tmp_path, n: int) -> Path:
    path = tmp_path / f"{n}.txt"
    path.write_text("\n\n".join(f"Document {i} starts here. It has a second sentence." for i in range(n))
                    + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_corpus_too_small_for_next_sentence_prediction_is_one_line_before_the_model_loads(
        tiny_model_dir, tmp_path, monkeypatch, n):
    """NSP draws its random B from another document, in the training documents and in the held-out ones,
    so each needs two: four documents at least (the held-out split takes two when --heldout's 5% is fewer)."""
    def not_loaded(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(pretrain_run.BertForPreTraining, "from_pretrained", not_loaded)
    with pytest.raises(SystemExit) as caught:
        pretrain_run.main(["--model", str(tiny_model_dir), "--text", str(documents_file(tmp_path, n)),
                           "--out", str(tmp_path / "r")])
    assert str(caught.value.code) == (
        f"error: the corpus has {n} document(s) with {max(n - 2, 0)} to train on and {min(n, 2)} held out, "
        "too few: next-sentence prediction draws its random second segment from another document, so the "
        "documents to train on and the held-out ones (--heldout) need 2 each; give at least 4 documents, or "
        "train masked-LM alone with --no-nsp")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("n, flags", [(4, []), (2, ["--no-nsp"])])
def test_the_smallest_corpora_train(tiny_model_dir, tmp_path, n, flags):
    assert pretrain_run.main(["--model", str(tiny_model_dir), "--text", str(documents_file(tmp_path, n)),
                              "--out", str(tmp_path / "r"), "--max-steps", "1", *flags]) == 0
    record = read_metrics(tmp_path / "r")[-1]["dev"]["pretrain"]
    assert ("nsp_accuracy" in record) == (not flags)  # the two held-out documents make NSP pairs


# Sends SIGTERM to its own process during the 3rd training step (the loop computes each loss through
# process.TaskLosses), then runs pretrain.run as `python -m pretrain.run` would.
SIGTERM_AT_STEP_3 = """
import os, runpy, signal, sys
from tasks.training import process as world
real, calls = world.TaskLosses.forward, []
def forward(self, name, batch):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    return real(self, name, batch)
world.TaskLosses.forward = forward
sys.orig_argv = [sys.executable, "-m", "pretrain.run", *sys.argv[1:]]
runpy.run_module("pretrain.run", run_name="__main__", alter_sys=True)
"""


def test_sigterm_stops_pretraining_saved_and_resume_goes_on_exactly(tiny_model_dir, tmp_path):
    common = ["--model", str(tiny_model_dir), "--within", "multitask", "--data-dir", str(SAMPLE_DIR),
              "--limit", "20", "--epochs", "2", "--batch-size", "8", "--no-eval-first", "--keep-checkpoints"]
    straight, stopped = tmp_path / "a", tmp_path / "b"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", SIGTERM_AT_STEP_3, *common, "--out", str(stopped)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 143 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    command = shlex.join([sys.executable, "-m", "pretrain.run", *common, "--out", str(stopped), "--resume"])
    assert line.startswith("interrupted by SIGTERM at step 3 of ") and line.endswith(
        f": the run is saved in {stopped / 'checkpoints' / 'last.pt'}; continue it with: {command}")
    saved = torch.load(stopped / "checkpoints" / "last.pt", weights_only=True)
    assert saved["train_state"]["global_step"] == 3
    assert pretrain_run.main(common + ["--out", str(stopped), "--resume"]) == 0
    assert pretrain_run.main(common + ["--out", str(straight)]) == 0
    a = torch.load(straight / "checkpoints" / "last.pt", weights_only=True)["model"]
    b = torch.load(stopped / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.data
def test_shared_corpora_read_quickly_and_whole(data_dir):
    from tasks.data.hierarchy import NEWSGROUPS_ARCHIVE
    posts = newsgroups_documents(data_dir / NEWSGROUPS_ARCHIVE, "train")
    assert 11_200 < len(posts) <= 11_314  # SOURCE.txt: 11,314 train posts; a few have no body
    assert not any(s.rstrip().endswith("writes:") for post in posts[:500] for s in post)
    settings = pretrain_run.build_parser().parse(["--within", "multitask", "--data-dir",
                                                  str(data_dir / "cs224n")]).pretrain
    documents, description = pretrain_run.read_corpus(settings)
    assert "sst train (8544 rows)" in description and "sts train (6040 rows)" in description
    assert sum(len(d) == 2 for d in documents) > 22_000  # Quora and STS rows: two-sentence documents

"""python -m tasks.classify: the model's layout, the loss with and without label embeddings, metrics,
stratified subsets, encoding and truncation, several seeds, resume, and bad flags. Runs use a tiny model
on small GLUE- and TREC-format files written here; one test reads the shared TREC file."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from minbert.config import BertConfig
from minbert.label_attention import label_loss
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from tasks import classify
from tasks.classify import ClassifyTask, LabelLossSettings, main_score, score
from tasks.data import classify_sets
from tasks.data.batching import pad_batch
from tasks.data.classify_sets import subsample
from tasks.data.examples import PairExample, SentenceExample
from tasks.models.classifier import ClassifyModel
from tasks.training.job import build_optimizer
from tasks.training.checkpoints import load_checkpoint
from tasks.training.settings import TrainingSettings, resolve_settings
from tasks.data.course import read_predictions

WORDS = "the cat sat on a mat while dogs ran far away from home and birds sang".split()


def sentence(i: int, n: int = 6) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    """GLUE-format RTE (pairs, header, word labels) and CoLA (no header), and a TREC file."""
    root = tmp_path_factory.mktemp("data")
    rte = root / "glue" / "RTE"
    rte.mkdir(parents=True)
    for split, n in (("train", 40), ("dev", 12)):
        rows = ["index\tsentence1\tsentence2\tlabel"] + [
            f"{i}\t{sentence(i, 9)}\t{sentence(i + 1)}\t{('entailment', 'not_entailment')[i % 2]}"
            for i in range(n)]
        (rte / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    cola = root / "glue" / "CoLA"
    (cola / "cola_public" / "raw").mkdir(parents=True)
    (cola / "glue_v1.0_dev_test").mkdir(parents=True)
    for path, n in ((cola / "cola_public" / "raw" / "in_domain_train.tsv", 30),
                    (cola / "glue_v1.0_dev_test" / "dev.tsv", 10)):
        path.write_text("".join(f"src\t{i % 2}\t\t{sentence(i)}\n" for i in range(n)), encoding="utf-8")
    (root / "trec").mkdir()
    coarse = ["ABBR:abb", "DESC:def", "ENTY:animal", "HUM:ind", "LOC:city", "NUM:date"]
    (root / "trec" / "train_5500.label").write_text(
        "".join(f"{coarse[i % 6]} {sentence(i)} ?\n" for i in range(60)), encoding="latin-1")
    return root


def run_args(tiny_model_dir, data_root, out, *extra):
    return ["--model", str(tiny_model_dir), "--data-dir", str(data_root), "--out", str(out),
            "--batch_size", "8", "--epochs", "2", "--max-length", "32", *extra]


@pytest.fixture
def tiny_bert() -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


# ----- model and loss -----------------------------------------------------------------------------


def test_label_embeddings_are_a_head_and_the_encoder_is_registered_once(tiny_bert):
    model = ClassifyModel(tiny_bert, 3, 0.0, label_layers="last:1")
    names = [name for name, _ in model.named_parameters()]
    assert "label_embeddings" in names and all(n.startswith(("bert.", "head.", "label_embeddings"))
                                               for n in names)
    assert not any(k.startswith("bert.bert.") for k in model.state_dict())
    groups = build_optimizer(model, TrainingSettings(lr=1e-5, head_lr=1e-3))
    head_params = [p for g in groups.param_groups if g["lr"] == 1e-3 for p in g["params"]]
    assert any(p is model.label_embeddings for p in head_params)
    assert sum(len(g["params"]) for g in groups.param_groups) == len(names)


def test_without_label_embeddings_the_model_is_the_vanilla_classifier(tiny_bert):
    model = ClassifyModel(tiny_bert, 2, 0.0).eval()
    assert model.label_embeddings is None
    tokens = pad_batch([[2, 5, 7, 3], [2, 9, 3]], pad_id=0)
    expected = model.head.classifier(tiny_bert(tokens.input_ids,
                                               tokens.attention_mask).last_hidden_state[:, 0])
    torch.testing.assert_close(model(tokens), expected)


def test_the_loss_is_cross_entropy_plus_lambda_times_the_label_loss(tiny_bert):
    tokenizer_free = ClassifyTask.__new__(ClassifyTask)  # only the loss's settings are needed
    tokenizer_free.label_loss = LabelLossSettings(weight=3.0, path="direct", reduction="sum")
    model = ClassifyModel(tiny_bert, 3, 0.0, label_layers="all").eval()
    tokens = pad_batch([[2, 5, 7, 3], [2, 9, 3]], pad_id=0)
    labels = torch.tensor([2, 0])
    expected = (F.cross_entropy(model(tokens), labels)
                + 3.0 * label_loss(model.head.classifier, model.label_embeddings, "direct", "sum"))
    torch.testing.assert_close(tokenizer_free.loss(model, (tokens, labels)), expected)
    tokenizer_free.label_loss = LabelLossSettings(weight=0.0)
    torch.testing.assert_close(tokenizer_free.loss(model, (tokens, labels)),
                               F.cross_entropy(model(tokens), labels))


# ----- metrics, subsets, encoding -------------------------------------------------------------------


def test_scores_on_a_worked_example():
    predictions, gold = [1, 1, 0, 0, 1], [1, 0, 0, 0, 1]
    # tp 2, fp 1, tn 2, fn 0: accuracy 4/5, F1 2*2/(2*2+1) = 0.8, MCC (4 - 0) / sqrt(3*2*3*2) = 2/3
    assert score("accuracy", predictions, gold) == {"accuracy": 0.8}
    assert score("accuracy+f1", predictions, gold) == pytest.approx({"accuracy": 0.8, "f1": 0.8})
    assert score("matthews", predictions, gold) == pytest.approx({"accuracy": 0.8, "matthews": 2 / 3})
    assert main_score("accuracy+f1", {"accuracy": 0.8, "f1": 0.6}) == pytest.approx(0.7)
    assert main_score("matthews", {"accuracy": 0.8, "matthews": 0.1}) == 0.1


def test_subsample_is_stratified_seeded_and_keeps_every_class():
    examples = [SentenceExample(str(i), "x", 0 if i < 90 else 1) for i in range(100)]  # 90 / 10
    part = subsample(examples, 0.2, seed=1)
    assert [e.label for e in part].count(0) == 18 and [e.label for e in part].count(1) == 2
    assert part == subsample(examples, 0.2, seed=1) and part != subsample(examples, 0.2, seed=2)
    assert [int(e.id) for e in part] == sorted(int(e.id) for e in part)  # original order kept
    tiny = subsample(examples, 0.001, seed=1)
    assert sorted(e.label for e in tiny) == [0, 1]  # at least one per class
    assert subsample(examples, 1.0, seed=1) == examples


def test_pairs_are_encoded_as_cls_a_sep_b_sep_and_long_texts_keep_head_and_tail(embedded_model_dir):
    tokenizer = BertTokenizer.from_pretrained(embedded_model_dir)
    ids, segments = classify.encode_examples(tokenizer, [PairExample("p", "a cat", "a dog", 0)], 32,
                                             "head+tail")
    assert tokenizer.convert_ids_to_tokens(ids[0]) == ["[CLS]", "a", "cat", "[SEP]", "a", "dog", "[SEP]"]
    assert segments[0] == [0, 0, 0, 0, 1, 1, 1]
    words = [f"w{i}" for i in range(300)]
    text = " ".join(words)
    pieces = tokenizer.tokenize(text)
    ids, segments = classify.encode_examples(tokenizer, [SentenceExample("s", text, 0)], 128, "head+tail")
    kept = tokenizer.convert_ids_to_tokens(ids[0])[1:-1]
    head = 128 * 126 // 510  # 31 pieces at the head, the remaining 95 from the end
    assert kept == pieces[:head] + pieces[len(pieces) - (126 - head):] and segments[0] == [0] * 128


def test_trec_tasks_read_the_shared_file(data_dir):
    spec, data = classify_sets.read_task_data(data_dir, "trec-fine", strict=False)
    assert len(spec.labels) == 50 and len(spec.keywords) == 50
    assert len(data["train"]) + len(data["dev"]) == 5452
    spec, data = classify_sets.read_task_data(data_dir, "trec-coarse", strict=False)
    assert spec.labels == ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
    assert {e.label for e in data["dev"]} == set(range(6))


# ----- runs ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeds_run(tiny_model_dir, data_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("classify") / "rte"
    assert classify.main(run_args(tiny_model_dir, data_root, out, "--task", "rte", "--label-embedding",
                                  "--label-init", "class-mean", "--seeds", "3", "4")) == 0
    return out


def test_seeds_run_writes_every_artefact_and_an_honest_summary(seeds_run):
    results = [json.loads((seeds_run / f"seed-{s}" / "result.json").read_text()) for s in (3, 4)]
    for seed in (3, 4):
        run = seeds_run / f"seed-{seed}"
        for name in ("config.json", "metrics.jsonl", "loss_and_dev.png",
                     "best/model.safetensors", "best/heads.safetensors", "best/heads.json"):
            assert (run / name).is_file(), name
        assert not (run / "checkpoints").exists()  # a finished seed drops its resume checkpoints
        header, rows = read_predictions(run / "predictions" / "rte-dev-output.csv")
        assert header == "Predicted_Label" and len(rows) == 12
        assert {r[1] for r in rows} <= {"entailment", "not_entailment"}
    summary = json.loads((seeds_run / "summary.json").read_text())
    values = [r["final"]["accuracy"] for r in results]
    assert summary["final"]["accuracy"]["values"] == values
    assert summary["final"]["accuracy"]["mean"] == pytest.approx(statistics.fmean(values))
    assert summary["final"]["accuracy"]["std"] == pytest.approx(statistics.stdev(values))
    assert all(r["epochs_complete"] == 2 and sum(map(sum, r["dev_confusion_best"])) == 12 for r in results)


def test_label_attention_runs_on_the_padded_path_where_auto_would_unpad(seeds_run):
    """Label attention reads the [CLS] row of every padded sequence: the settings resolve its kernel to sdpa
    once, where fp32 on a CPU takes the unpadded one without it; config.json records the kernel run."""
    config = json.loads((seeds_run / "seed-3" / "config.json").read_text())
    assert (config["label_embedding"], config["attn_implementation"]) == (True, "sdpa")
    before = torch.get_num_threads()
    try:
        for flags, kernel in (([], "unpadded"), (["--label-embedding"], "sdpa")):
            parsed = classify.build_parser().parse(["--task", "rte", "--precision", "fp32", "--threads", "1",
                                                    *flags])
            assert resolve_settings(parsed).job.attn_implementation == kernel
    finally:
        torch.set_num_threads(before)


def test_best_checkpoint_reloads_with_its_label_embeddings(seeds_run, tiny_model_dir):
    run = seeds_run / "seed-3" / "best"
    bert = BertModel.from_pretrained(run)
    model = ClassifyModel(bert, 2, 0.0, label_layers="all")
    before = model.label_embeddings.detach().clone()
    load_checkpoint(model, run)
    assert not torch.equal(before, model.label_embeddings)
    vanilla = ClassifyModel(BertModel.from_pretrained(run), 2, 0.0)
    with pytest.raises(ValueError, match="does not fit the model's heads"):
        load_checkpoint(vanilla, run)


def test_resume_skips_finished_seeds(seeds_run, tiny_model_dir, data_root, capsys):
    stamp = (seeds_run / "seed-3" / "result.json").stat().st_mtime_ns
    assert classify.main(run_args(tiny_model_dir, data_root, seeds_run, "--task", "rte", "--label-embedding",
                                  "--label-init", "class-mean", "--seeds", "3", "4", "--resume")) == 0
    assert "seed 3: finished earlier" in capsys.readouterr().err
    assert (seeds_run / "seed-3" / "result.json").stat().st_mtime_ns == stamp


@pytest.mark.parametrize("task, extra", [("cola", ["--label-embedding", "--label-init", "keywords"]),
                                         ("trec-coarse", ["--train-fraction", "0.5"]),
                                         ("trec-fine", ["--label-embedding", "--label-layers", "last:1"])])
def test_single_sentence_tasks_run(tiny_model_dir, data_root, tmp_path, task, extra):
    assert classify.main(run_args(tiny_model_dir, data_root, tmp_path / "run", "--task", task,
                                  "--epochs", "1", *extra)) == 0
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["task"] == task and (("matthews" in result["final"]) == (task == "cola"))
    if task == "trec-coarse":
        assert result["train_examples"] == 30  # 54 training questions, 9 per class: 4.5 rounds up to 5


@pytest.mark.parametrize("flags, message", [
    (["--label-lambda", "1"], "--label-lambda needs --label-embedding"),
    (["--label-embedding", "--label-keywords", "a;b"], "--label-keywords needs --label-init keywords"),
    (["--seed", "1", "--seeds", "1", "2"], "give --seed or --seeds, not both"),
    (["--seeds", "1", "1"], "--seeds has repeats"),
    (["--train-fraction", "0"], "argument --train-fraction: must be a number in (0, 1]"),
    (["--label-embedding", "--label-layers", "x,y"], "--label-layers must be"),
    (["--layer-features", "last-4", "--pooling", "mean"], "--layer-features reads [CLS] vectors"),
    (["--layer-combine", "max"], "--layer-combine applies to several layers"),
    (["--chunks", "mean"], "--chunks splits single texts"),  # rte is a pair task
    (["--max-chunks", "3"], "--max-chunks needs --chunks"),
    (["--label-embedding", "--layer-features", "all"],
     "combine several layers with --layer-combine mean or max"),
])
def test_contradictory_flags_are_errors(tiny_model_dir, data_root, tmp_path, flags, message, capsys):
    with pytest.raises(SystemExit) as error:
        classify.main(run_args(tiny_model_dir, data_root, tmp_path / "run", "--task", "rte", *flags))
    assert error.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--label-embedding", "--label-layers", "5"], "label layers must be indices in 0..1"),
    (["--label-embedding", "--label-init", "keywords", "--label-keywords", "a b;c d;e"], "needs 2 non-empty"),
])
def test_bad_label_settings_are_one_line_errors(tiny_model_dir, data_root, tmp_path, flags, message):
    with pytest.raises(SystemExit, match=message):
        classify.main(run_args(tiny_model_dir, data_root, tmp_path / "run", "--task", "rte", *flags))


def test_missing_data_is_named(tiny_model_dir, tmp_path):
    (tmp_path / "data" / "glue").mkdir(parents=True)  # (an --out inside the data folder is refused)
    with pytest.raises(SystemExit, match=r"error: .*RTE/train.tsv"):
        classify.main(run_args(tiny_model_dir, tmp_path / "data", tmp_path / "run", "--task", "rte"))
    with pytest.raises(SystemExit) as error:  # refused by --data-dir's type, before any work
        classify.main(run_args(tiny_model_dir, tmp_path / "nowhere", tmp_path / "run", "--task", "rte"))
    assert error.value.code == 2 and not (tmp_path / "run").exists()


def test_label_attention_notebook_runs_on_two_tiny_runs(tiny_model_dir, data_root, tmp_path, run_notebook):
    for arm, extra in (("vanilla", []), ("label", ["--label-embedding", "--label-init", "keywords"])):
        assert classify.main(run_args(tiny_model_dir, data_root, tmp_path / arm, "--task", "cola",
                                      "--epochs", "1", *extra)) == 0
    outputs = run_notebook("label_attention.ipynb", {"MINBERT_VANILLA_RUN": str(tmp_path / "vanilla"),
                                                     "MINBERT_LABEL_RUN": str(tmp_path / "label")})
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1  # the highlighted text
    printed = "".join(o.get("text", "") for o in outputs)
    assert "unacceptable: " in printed and "acceptable: " in printed  # nearest words of both labels

"""The main job's options from issue 20, on a tiny model: SST's regularisers (label smoothing, multi-sample
dropout, R-Drop, SMART) against the losses written out by hand (SMART's ascent step against finite
differences), the Quora decision threshold fitted on the training pairs against a brute-force search, and
AnglE through the job. The losses themselves: test_task_heads.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tasks import multitask
from tasks.models import pair_task
from tasks.data.course import read_split
from tasks.data.sources import SAMPLE_DIR
from tasks.models import smoothness
from tasks.models.heads import angle_loss, symmetric_kl
from tasks.training.config import TrainConfig
from tasks.training.job import load_encoder, read_predictions


@pytest.fixture(scope="module")
def tiny_parts(tiny_model_dir):
    """A fresh MultitaskBERT maker (dropout 0.3 everywhere, so that masks matter) and the tokenizer."""
    def make(**options) -> multitask.MultitaskBERT:
        torch.manual_seed(0)
        bert, _, _ = load_encoder(str(tiny_model_dir), "eager")
        return multitask.MultitaskBERT(bert, dropout=0.3, **options)
    return make, load_encoder(str(tiny_model_dir), "eager")[1]


def sst_task(tokenizer, **regularisers) -> multitask.RegularisedSentimentTask:
    train = read_split(SAMPLE_DIR, "sst", "train").examples[:6]
    return multitask.RegularisedSentimentTask("sst", tokenizer, train, train, batch_size=6, seed=0,
                                              max_length=64, **regularisers)


def para_task(tokenizer, rows: int = 40) -> pair_task.PairTask:
    splits = {split: read_split(SAMPLE_DIR, "quora", split).examples[:rows] for split in ("train", "dev")}
    return multitask.course_task("para", splits, tokenizer, TrainConfig(batch_size=8), 64)


def capture_head_outputs(model) -> list[torch.Tensor]:
    """Every output of the sentiment head from now on, in call order."""
    outputs: list[torch.Tensor] = []
    model.sentiment.register_forward_hook(lambda module, args, out: outputs.append(out.detach().float()))
    return outputs


def test_sst_with_no_regulariser_is_the_plain_cross_entropy(tiny_parts):
    make, tokenizer = tiny_parts
    task, model = sst_task(tokenizer), make()
    batch = task.train_batches(0)[0]
    torch.manual_seed(1)
    ours = task.loss(model, batch)
    torch.manual_seed(1)
    plain = multitask.SentimentTask.loss(task, model, batch)
    assert ours.item() == plain.item()


def test_label_smoothing_by_hand(tiny_parts):
    make, tokenizer = tiny_parts
    model = make().eval()  # no dropout: the logits are fixed
    tokens, labels = sst_task(tokenizer).train_batches(0)[0]
    log_p = model.predict_sentiment(tokens).float().log_softmax(-1)  # (B, 5)
    eps = 0.2
    # the target is (1 - eps) on the gold class plus eps / K on every class
    expected = -((1 - eps) * log_p.gather(1, labels[:, None]).squeeze(1) + eps * log_p.mean(-1)).mean()
    ours = sst_task(tokenizer, label_smoothing=eps).loss(model, (tokens, labels))
    assert ours.item() == pytest.approx(expected.item(), rel=1e-5)


def test_multi_sample_dropout_averages_k_head_passes_over_one_encoder_pass(tiny_parts):
    make, tokenizer = tiny_parts
    model = make().train()
    encoder_calls = []
    model.bert.register_forward_hook(lambda module, args, out: encoder_calls.append(args[0].shape))
    heads = capture_head_outputs(model)
    tokens, labels = sst_task(tokenizer).train_batches(0)[0]
    loss = sst_task(tokenizer, dropout_samples=4).loss(model, (tokens, labels))
    assert encoder_calls == [tokens.input_ids.shape] and len(heads) == 4
    assert not torch.equal(heads[0], heads[1])  # a new dropout mask for every sample
    expected = sum(F.cross_entropy(z, labels) for z in heads) / 4
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_r_drop_sends_each_sentence_twice_and_adds_the_symmetric_kl(tiny_parts):
    make, tokenizer = tiny_parts
    model = make().train()
    heads = capture_head_outputs(model)
    tokens, labels = sst_task(tokenizer).train_batches(0)[0]
    b = labels.size(0)
    loss = sst_task(tokenizer, r_drop=0.5).loss(model, (tokens, labels))
    (logits,) = heads  # (2B, K): both passes in one encoder call
    first, second = logits[:b], logits[b:]
    assert logits.shape[0] == 2 * b and not torch.allclose(first, second)  # two dropout masks per sentence
    expected = F.cross_entropy(logits, labels.repeat(2)) + 0.5 * symmetric_kl(first, second)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    # without dropout the two passes agree and R-Drop adds nothing
    model.eval()
    plain = sst_task(tokenizer).loss(model, (tokens, labels))
    assert sst_task(tokenizer, r_drop=0.5).loss(model, (tokens, labels)).item() == pytest.approx(plain.item(),
                                                                                             rel=1e-5)


def test_smart_ascent_step_follows_the_finite_difference_gradient():
    torch.manual_seed(0)
    B, T, C, K = 2, 3, 4, 5
    weight = torch.randn(C, K, dtype=torch.float64) * 10

    def logits_of(embeds):  # a small smooth model: mean over tokens, then linear
        return embeds.mean(1) @ weight

    embeds = torch.randn(B, T, C, dtype=torch.float64)
    clean, noise = logits_of(embeds), torch.randn(B, T, C, dtype=torch.float64) * 1e-2

    def divergence(n):
        return symmetric_kl(logits_of(embeds + n), clean).item()

    h, grad = 1e-6, torch.zeros_like(noise)  # central differences, one coordinate at a time
    for i in range(noise.numel()):
        bump = torch.zeros(noise.numel(), dtype=torch.float64)
        bump[i] = h
        bump = bump.view_as(noise)
        grad.view(-1)[i] = (divergence(noise + bump) - divergence(noise - bump)) / (2 * h)
    step = noise + smoothness.STEP_SIZE * grad
    expected = step / (step.abs().amax(-1, keepdim=True) + smoothness.EPSILON)
    direction = smoothness.adversarial_direction(logits_of, embeds, clean, noise)
    torch.testing.assert_close(direction, expected, rtol=0, atol=1e-9)
    unit_noise = noise / (noise.abs().amax(-1, keepdim=True) + smoothness.EPSILON)
    assert (direction - unit_noise).abs().max() > 1e-4  # the gradient moved it, not only the noise
    # each token's largest coordinate is 1 (up to EPSILON against a largest step of about 1e-2)
    torch.testing.assert_close(direction.abs().amax(-1), torch.ones(B, T, dtype=torch.float64), atol=1e-3,
                               rtol=0)
    value = smoothness.adversarial_smoothness(logits_of, embeds, clean, noise)
    assert value.item() == pytest.approx(divergence(expected), rel=1e-12)
    # --smart-radius scales the perturbation, not its direction
    torch.testing.assert_close(smoothness.adversarial_direction(logits_of, embeds, clean, noise, radius=0.05),
                               0.05 * expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("r_drop", [0.0, 0.5])
def test_smart_adds_lambda_times_the_perturbed_kl_to_the_sst_loss(tiny_parts, r_drop):
    make, tokenizer = tiny_parts
    model = make().train()
    heads = capture_head_outputs(model)
    tokens, labels = sst_task(tokenizer).train_batches(0)[0]
    loss = sst_task(tokenizer, r_drop=r_drop, smart=0.5).loss(model, (tokens, labels))
    clean, _ascent, perturbed = heads  # the clean pass, the ascent step's pass, the perturbed pass
    copies = 2 if r_drop else 1
    assert clean.shape[0] == perturbed.shape[0] == copies * labels.size(0)
    expected = F.cross_entropy(clean, labels.repeat(copies)) + 0.5 * symmetric_kl(perturbed, clean)
    if r_drop:
        expected = expected + r_drop * symmetric_kl(*clean.chunk(2))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()  # the perturbed pass reaches the word vectors too
    assert model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_smart_runs_on_the_jobs_fast_path_unpadded_in_bf16(tiny_model_dir, tiny_parts):
    _, tokenizer = tiny_parts
    torch.manual_seed(0)
    bert, _, _ = load_encoder(str(tiny_model_dir), "unpadded")
    model = multitask.MultitaskBERT(bert, dropout=0.3).train()
    tokens, labels = sst_task(tokenizer).train_batches(0)[0]
    assert not tokens.attention_mask.all()  # padding, so the unpadded kernel packs the perturbed vectors
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = sst_task(tokenizer, r_drop=1.0, smart=1.0).loss(model, (tokens, labels))
    loss.backward()
    assert torch.isfinite(loss) and model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_fitted_threshold_classifies_the_training_pairs_best(tiny_parts):
    make, tokenizer = tiny_parts
    model, task = make(paraphrase_threshold="train").eval(), para_task(tokenizer)
    with torch.no_grad():
        threshold = task.fit_threshold(model)
        groups = [[i] for i in range(len(task.train_inputs))]
        logits = torch.cat([task.scores(model, task.collate([task.train_inputs[i] for i in g]))
                            for g in groups])  # one pair at a time: no padding at all
    labels = torch.tensor(task.train_labels) > 0.5
    accuracy = lambda t: ((logits > t) == labels).float().mean().item()  # noqa: E731
    # brute force: every midpoint between two neighbouring logits, and both ends
    ordered = logits.sort().values
    candidates = [ordered[0].item() - 1, ordered[-1].item() + 1, *((ordered[1:] + ordered[:-1]) / 2).tolist()]
    assert accuracy(threshold) == max(accuracy(t) for t in candidates)
    assert accuracy(threshold) >= max(labels.float().mean().item(), 1 - labels.float().mean().item())


def test_the_threshold_is_fitted_on_a_fixed_sample_of_the_training_pairs(tiny_parts, monkeypatch):
    make, tokenizer = tiny_parts
    model, task = make(paraphrase_threshold="train").eval(), para_task(tokenizer)
    monkeypatch.setattr(pair_task, "THRESHOLD_PAIRS", 10)
    scored = []
    score = task.scores
    monkeypatch.setattr(task, "scores", lambda m, tokens: scored.append(score(m, tokens)) or scored[-1])
    with torch.no_grad():
        first = task.fit_threshold(model)
        assert sum(len(s) for s in scored) == 10  # of the 40 training pairs
        assert task.fit_threshold(model) == first  # the same sample every time


def test_evaluation_fits_the_threshold_and_predictions_use_it(tiny_parts):
    make, tokenizer = tiny_parts
    task = para_task(tokenizer)
    learned, fitted = make().eval(), make(paraphrase_threshold="train").eval()
    with torch.no_grad():
        fitted.paraphrase_threshold.fill_(123.0)  # stale: evaluate() must refit it
        dev = task.evaluate(fitted)
        assert fitted.paraphrase_threshold.item() == pytest.approx(task.fit_threshold(fitted))
        tokens = task.collate(task.dev_inputs)
        logits = fitted.predict_paraphrase(tokens)
        assert task.predict(fitted, task.dev_inputs) == (logits > fitted.paraphrase_threshold).long().tolist()
        # the default model has no threshold of its own: logit 0, the head's learned boundary
        assert not hasattr(learned, "paraphrase_threshold")
        at_zero = (learned.predict_paraphrase(tokens) > 0).long().tolist()
        assert task.predict(learned, task.dev_inputs) == at_zero
    assert 0 <= dev["accuracy"] <= 1


def test_a_run_with_the_fitted_threshold_predicts_its_own_files_again(tiny_multitask_run, tmp_path):
    run = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(run, "--paraphrase-threshold", "train",
                                   "--similarity-loss", "angle", "--r-drop", "1", "--dropout-samples", "2",
                                   "--label-smoothing", "0.1")) == 0
    settings = json.loads((run / "best" / "heads.json").read_text())
    assert settings["paraphrase_threshold"] == "train" and settings["similarity_loss"] == "angle"
    out = tmp_path / "predicted"
    assert multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--limit", "16",
                           "--out", str(out)]) == 0
    for name in ("para-dev-output.csv", "sts-dev-output.csv"):
        assert read_predictions(out / name) == read_predictions(run / "predictions" / name)


def test_runs_from_before_the_threshold_option_still_predict(tiny_multitask_run, tmp_path):
    run = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(run)) == 0
    settings_path = run / "best" / "heads.json"
    settings = json.loads(settings_path.read_text())
    assert settings.pop("paraphrase_threshold") == "learned"
    settings_path.write_text(json.dumps(settings))  # as an older version wrote it
    out = tmp_path / "predicted"
    assert multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--limit", "16",
                           "--out", str(out)]) == 0
    assert read_predictions(out / "para-dev-output.csv") == read_predictions(run / "predictions" /
                                                                             "para-dev-output.csv")
    settings["paraphrase_threshold"] = "tuned"
    settings_path.write_text(json.dumps(settings))
    with pytest.raises(SystemExit, match="heads.json: paraphrase_threshold is 'tuned'"):
        multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--out", str(tmp_path / "b")])


def test_angle_loss_is_what_the_similarity_task_trains_on(tiny_parts):
    make, tokenizer = tiny_parts
    splits = {split: read_split(SAMPLE_DIR, "sts", split).examples[:8] for split in ("train", "dev")}
    task = multitask.course_task("sts", splits, tokenizer, TrainConfig(batch_size=8), 64,
                                 similarity_loss="angle")
    model = make().eval()
    tokens, labels = task.train_batches(0)[0]
    u, v = model.embed_pair(tokens)
    expected = angle_loss(u, v, labels).item()
    assert task.loss(model, (tokens, labels)).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("extra, message", [
    (["--label-smoothing", "1"], "--label-smoothing"),
    (["--dropout-samples", "0"], "--dropout-samples"),
    (["--r-drop", "-1"], "--r-drop"),
    (["--smart", "-1"], "--smart"),
    (["--smart-radius", "0"], "--smart-radius"),
    (["--paraphrase-threshold", "dev"], "--paraphrase-threshold"),
])
def test_bad_values_are_refused_by_name(extra, message, capsys):
    with pytest.raises(SystemExit):
        multitask.build_parser().parse_args(extra)
    assert message in capsys.readouterr().err


def test_a_threshold_for_the_softmax_head_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit, match="--paraphrase-threshold applies to a paraphrase head with one"):
        multitask.main(["--paraphrase-head", "softmax", "--paraphrase-threshold", "train",
                        "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_a_smart_radius_without_smart_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="--smart-radius sets SMART's perturbation, but SMART is off"):
        multitask.main(["--smart-radius", "0.05", "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_the_default_run_records_its_head_and_regulariser_settings(tiny_multitask_run, tmp_path):
    run = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(run)) == 0
    config = json.loads(Path(run / "config.json").read_text())
    expected = {"paraphrase_threshold": "learned", "label_smoothing": 0.0, "dropout_samples": 1,
                "r_drop": 1.0, "smart": 0.0, "smart_radius": 1.0,
                "sentiment_pooling": "cls", "pair_pooling": "mean"}
    assert {k: config[k] for k in expected} == expected
    # --predict rebuilds the heads from heads.json: it must say how SST's head pools.
    heads = json.loads(Path(run / "best" / "heads.json").read_text())
    assert (heads["sentiment_pooling"], heads["pair_pooling"]) == ("cls", "mean")

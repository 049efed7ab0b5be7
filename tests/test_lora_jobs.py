"""--lora on the fine-tuning jobs (tasks/training/job.py, checkpoints.py), with the tiny model.

A LoRA run of the main job trains the adapters and the heads only (the encoder's weights bit-identical after
it, the optimizer holding nothing else); its best/ is peft's adapter folder (`peft.PeftModel` on the base
model gives our merged encoder's outputs, atol 1e-5 as in test_lora.py) plus a merged plain folder that
`transformers` and ours open; best/ itself opens in BertModel.from_pretrained, SentenceEncoder, --model and
transformers' AutoModel alike; it resumes to the weights of an uninterrupted run (torch.equal) and refuses a
--resume with another --lora; --predict reads it back to the run's own predictions; every other fine-tuning
job takes --lora (on the shared data). 15 tests, 32 s on 2 CPU cores at a load average of 6.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from minbert.loading.adapter_files import load_adapter
from minbert.model import BertModel
from minbert.text.tokenizer import BertTokenizer
from minbert.sentence_encoder import SentenceEncoder
from tasks import classify, hierarchical, multitask, sentiment, tag
from tasks.data.course import read_predictions
from tasks.data.sources import SAMPLE_DIR
from minbert.loading.hub import MERGED

TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def lora_run(tiny_multitask_run, tmp_path_factory):
    """Two steps of the main job with r = 4 adapters, a large learning rate so that they move measurably."""
    out = tmp_path_factory.mktemp("lora") / "run"
    assert multitask.main(tiny_multitask_run(out, "--lora", "4", "--lr", "1e-2", "--keep-checkpoints")) == 0
    return out


def test_a_lora_run_trains_only_the_adapters_and_the_heads(lora_run, tiny_model_dir):
    base = load_file(tiny_model_dir / "model.safetensors")
    last = torch.load(lora_run / "checkpoints" / "last.pt", weights_only=True)
    weights = last["model"]
    encoder = {k.removeprefix("bert.").replace(".base_layer.", "."): v for k, v in weights.items()
               if k.startswith("bert.") and ".lora_" not in k}
    assert set(encoder) == set(base) and all(torch.equal(encoder[k], base[k]) for k in base)
    adapters = sorted(k for k in weights if ".lora_" in k)
    assert len(adapters) == 2 * 2 * 2  # 2 layers x (query, value) x (A, B)
    assert all(weights[k].abs().max() > 0 for k in adapters if ".lora_B" in k)  # B started at zero
    # The optimizer was given the adapters and the heads, nothing of the frozen encoder.
    given = {n for group in last["optimizer"]["param_groups"] for n in group["param_names"]}
    heads = {k for k in weights if not k.startswith("bert.")}
    assert given == {k.removeprefix("bert.") for k in adapters} | heads


def test_a_lora_runs_best_loads_in_peft_transformers_and_ours(lora_run, tiny_model_dir):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    best = lora_run / "best"
    assert json.loads((best / "adapter_config.json").read_text())["r"] == 4
    torch.manual_seed(0)
    ids = torch.randint(1000, 2000, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        ours = BertModel.from_pretrained(best / MERGED).eval()(ids, mask).last_hidden_state
        plain = transformers.BertModel.from_pretrained(tiny_model_dir, attn_implementation="eager").eval()
        before = plain(input_ids=ids, attention_mask=mask).last_hidden_state
        theirs = peft.PeftModel.from_pretrained(plain, best).eval()
        torch.testing.assert_close(theirs(input_ids=ids, attention_mask=mask).last_hidden_state, ours, **TOL)
        merged = transformers.BertModel.from_pretrained(best / MERGED, attn_implementation="eager").eval()
        torch.testing.assert_close(merged(input_ids=ids, attention_mask=mask).last_hidden_state, ours, **TOL)
        adapted = BertModel.from_pretrained(tiny_model_dir)
        load_adapter(adapted, best)  # peft's folder onto our base model, unmerged
        torch.testing.assert_close(adapted.eval()(ids, mask).last_hidden_state, ours, **TOL)
    assert (ours - before).abs().max() > 1e-3  # the adapters changed the outputs: the comparisons mean something


def test_a_lora_runs_best_opens_wherever_a_model_folder_opens(lora_run, tmp_path):
    best = lora_run / "best"
    sentences = ["a run folder opens everywhere", "short"]
    expected = SentenceEncoder(best / MERGED, device="cpu").encode(sentences, convert_to_tensor=True)
    torch.testing.assert_close(SentenceEncoder(best, device="cpu").encode(sentences, convert_to_tensor=True),
                               expected, atol=0, rtol=0)
    text = "a run folder opens everywhere"
    tokenizers = [BertTokenizer.from_pretrained(folder) for folder in (best, best / MERGED)]
    assert tokenizers[0].encode(text) == tokenizers[1].encode(text)
    merged = BertModel.from_pretrained(best / MERGED).state_dict()
    assert all(torch.equal(v, merged[k]) for k, v in BertModel.from_pretrained(best).state_dict().items())
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("peft")  # transformers reads an adapter folder through peft: base model + adapters
    ids = torch.randint(1000, 2000, (2, 7))
    with torch.no_grad():
        theirs = transformers.AutoModel.from_pretrained(best).eval()(input_ids=ids).last_hidden_state
        ours = BertModel.from_pretrained(best).eval()(ids).last_hidden_state
    torch.testing.assert_close(ours, theirs, **TOL)
    # sentence-transformers finds the tokenizer and its own files in best/ itself: base model + adapters
    sentence_transformers = pytest.importorskip("sentence_transformers")
    st = sentence_transformers.SentenceTransformer(str(best), device="cpu")
    torch.testing.assert_close(st.encode(sentences, convert_to_tensor=True), expected, **TOL)
    again = tmp_path / "again"
    assert multitask.main(["--model", str(best), "--data-dir", str(SAMPLE_DIR), "--out", str(again),
                           "--limit", "16", "--batch_size", "8", "--max-steps", "1"]) == 0


def test_predict_reads_a_lora_run_back_to_its_own_predictions(lora_run, tmp_path, same_predictions):
    out = tmp_path / "predicted"
    assert multitask.main(["--predict", str(lora_run), "--data-dir", str(SAMPLE_DIR), "--limit", "16",
                           "--out", str(out)]) == 0
    for name in ("sst-dev-output.csv", "para-dev-output.csv", "sts-test-output.csv"):
        same_predictions(read_predictions(out / name), read_predictions(lora_run / "predictions" / name))


def test_a_stopped_lora_run_resumes_to_the_weights_of_an_uninterrupted_one(tiny_multitask_run, tmp_path,
                                                                           capsys):
    lora = ["--lora", "2", "--lora-dropout", "0.2", "--lr", "1e-2", "--keep-checkpoints"]  # dropout: RNG
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert multitask.main(tiny_multitask_run(straight, *lora, "--max-steps", "4")) == 0
    assert multitask.main(tiny_multitask_run(stopped, *lora)) == 0  # 2 of 4 steps
    for other, said in ((lora[4:], "started with --lora 2, --lora-dropout 0.2, but this command asks for "
                                   "--lora None"), (["--lora", "8", *lora[2:]], "asks for --lora 8")):
        with pytest.raises(SystemExit, match=said):
            multitask.main(tiny_multitask_run(stopped, *other, "--resume", "--max-steps", "4"))
    assert multitask.main(tiny_multitask_run(stopped, *lora, "--resume", "--max-steps", "4")) == 0
    a, b = (torch.load(d / "checkpoints" / "last.pt", weights_only=True) for d in (straight, stopped))
    assert a["train_state"]["global_step"] == b["train_state"]["global_step"] == 4
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


@pytest.mark.parametrize("flags, message", [
    (["--lora", "0"], "argument --lora: must be an integer >= 1, got '0'"),
    (["--lora", "4", "--option", "pretrain"], "--lora 4 trains adapters in the encoder, but --option pretrain"),
    (["--lora-alpha", "8", "--lora-targets", "all-linear"], "--lora-alpha, --lora-targets set(s) the LoRA"),
    (["--lora", "4", "--predict", str(SAMPLE_DIR)], "--lora 4 belong(s) to training"),
    (["--lora", "4", "--lora-targets", "query, ,value"], "argument --lora-targets: must be all-linear or"),
])
def test_contradictory_or_malformed_lora_flags_are_usage_errors(flags, message, capsys):
    with pytest.raises(SystemExit) as error:
        multitask.main(flags)
    assert error.value.code == 2 and message in capsys.readouterr().err


def test_lora_targets_that_name_no_layer_are_an_error_naming_the_flag(tiny_multitask_run, tmp_path):
    with pytest.raises(SystemExit, match=r"error: --lora-targets dense_typo: LoRA targets \['dense_typo'\] "
                                         "match no nn.Linear"):
        multitask.main(tiny_multitask_run(tmp_path / "run", "--lora", "2", "--lora-targets", "dense_typo"))


JOBS = {"sentiment": (sentiment, []), "classify": (classify, ["--task", "rte"]),
        "hierarchical": (hierarchical, ["--dataset", "hwv"]), "tag": (tag, [])}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_other_fine_tuning_job_takes_lora(job, tiny_model_dir, data_dir, tmp_path):
    module, extra = JOBS[job]
    out = tmp_path / "run"
    assert module.main(["--model", str(tiny_model_dir), "--data-dir", str(SAMPLE_DIR if job == "sentiment"
                                                                         else data_dir),
                        "--out", str(out), "--limit", "16", "--batch_size", "8", "--epochs", "1",
                        "--max-length", "32", "--max-steps", "1", "--lora", "2", "--lora-targets", "all-linear",
                        *extra]) == 0
    config = json.loads((out / "best" / "adapter_config.json").read_text())
    assert config["r"] == 2 and any(name.endswith("intermediate.dense") for name in config["target_modules"])
    assert (out / "best" / MERGED / "model.safetensors").is_file() and (out / "best" / "heads.json").is_file()

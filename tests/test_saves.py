"""Every save is whole or absent, and a job's checkpoints prove they are whole (minbert/loading/atomic.py).

A library save (save_pretrained, SentenceEncoder.save, save_adapter, save_merged) stopped half-way by a full
disk, an exception or a refused argument leaves the old folder byte for byte as it was, and loads as it did;
files in the folder that the save does not write are kept; every file and folder is flushed before the rename.
One flipped bit, or a cut, in last.pt, best/model.safetensors or best/heads.safetensors is named as damaged by
--resume and --predict and never trusted; --resume goes on from the earlier checkpoint where one is kept."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minbert import BertConfig, BertModel, SentenceEncoder
from minbert.loading import adapter_files, atomic
from minbert.loading.adapter_files import load_adapter, save_adapter, save_merged
from minbert.loading.atomic import DamagedFileError, verify_folder
from minbert.lora import apply_lora
from minbert.text.tokenizer import BertTokenizer
from tasks import multitask, sentiment
from tasks.data.sources import SAMPLE_DIR

REPO = Path(__file__).resolve().parents[1]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]  # BertConfig.tiny's 99


def tiny(seed: int) -> BertModel:
    torch.manual_seed(seed)
    return BertModel(BertConfig.tiny()).eval()


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under a folder by relative path, with a file's bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def no_room_for(name: str, monkeypatch) -> None:
    """Writing a text file called `name` finds the disk full (as file.write says it: with no file name)."""
    real = Path.write_text

    def write_text(path, *args, **kwargs):
        if path.name == name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


def nothing_beside(folder: Path) -> None:
    """No temporary or old folder of a save is left next to `folder`."""
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}.")] == []


# ----- library saves, interrupted or refused ------------------------------------------------------------


def test_a_full_disk_half_way_through_sentence_encoder_save_keeps_the_old_weights_with_the_old_pooling(
        tmp_path, monkeypatch):
    path = tmp_path / "encoder"
    SentenceEncoder(tiny(0), BertTokenizer(VOCAB), pooling="cls", device="cpu").save(path)
    before = snapshot(path)
    no_room_for("modules.json", monkeypatch)  # the last file, after the weights and the pooling's
    newer = SentenceEncoder(tiny(1), BertTokenizer(VOCAB), pooling="mean", device="cpu")
    with pytest.raises(OSError) as error:
        newer.save(path)
    assert error.value.errno == errno.ENOSPC and error.value.filename == str(path / "modules.json")
    monkeypatch.undo()
    assert snapshot(path) == before
    nothing_beside(path)
    loaded = SentenceEncoder(path, device="cpu")
    assert loaded.pooling == "cls"
    assert torch.equal(loaded.model.pooler.dense.weight, tiny(0).pooler.dense.weight)


def adapted(seed: int, alpha: float) -> BertModel:
    model = tiny(seed)
    apply_lora(model, r=4, alpha=alpha)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_()  # B starts at zero: give the saves something to tell apart
    return model


def test_a_full_disk_half_way_through_save_adapter_keeps_the_old_a_b_and_alpha(tmp_path, monkeypatch):
    path = tmp_path / "adapter"
    save_adapter(adapted(0, alpha=16.0), path)
    before = snapshot(path)
    no_room_for(adapter_files.CONFIG_FILE, monkeypatch)  # after adapter_model.safetensors
    with pytest.raises(OSError) as error:
        save_adapter(adapted(1, alpha=32.0), path)
    assert error.value.filename == str(path / adapter_files.CONFIG_FILE)
    monkeypatch.undo()
    assert snapshot(path) == before
    nothing_beside(path)
    again = tiny(0)
    load_adapter(again, path)
    old = adapted(0, alpha=16.0)
    assert all(torch.equal(again.state_dict()[k], v) for k, v in old.state_dict().items() if "lora" in k)
    assert {layer.lora_alpha for layer in adapter_files.lora_layers(again).values()} == {16.0}


def test_an_exception_half_way_through_save_pretrained_or_save_merged_keeps_the_old_folder(tmp_path):
    class Failing:
        def save(self, directory):  # called after the weights and config.json are written
            raise RuntimeError("the tokenizer's save failed")

    path = tmp_path / "model"
    tiny(0).save_pretrained(path, tokenizer=BertTokenizer(VOCAB))
    before = snapshot(path)
    with pytest.raises(RuntimeError, match="tokenizer's save failed"):
        tiny(1).save_pretrained(path, tokenizer=Failing())
    with pytest.raises(RuntimeError, match="tokenizer's save failed"):
        save_merged(adapted(1, alpha=8.0), path, tokenizer=Failing())
    assert snapshot(path) == before
    nothing_beside(path)
    assert torch.equal(BertModel.from_pretrained(path).pooler.dense.weight, tiny(0).pooler.dense.weight)


def test_a_refused_argument_leaves_the_old_folder_as_it_was(tmp_path):
    model_path, adapter_path = tmp_path / "model", tmp_path / "adapter"
    tiny(0).save_pretrained(model_path)
    save_adapter(adapted(0, alpha=16.0), adapter_path)
    before = snapshot(model_path), snapshot(adapter_path)
    from minbert.loading.checkpoint import save_model

    with pytest.raises(ValueError, match="format"):
        save_model(tiny(1), model_path, format="pt")
    with pytest.raises(ValueError, match="no LoRA adapters"):
        save_adapter(tiny(1), adapter_path)
    assert (snapshot(model_path), snapshot(adapter_path)) == before
    nothing_beside(model_path)


# Saves a tiny model (seed 1) over the folder given, under a file size limit smaller than its weights file:
# the kernel refuses the write with EFBIG, as a full disk refuses one with ENOSPC.
SAVE_UNDER_A_SIZE_LIMIT = """
import resource, signal, sys, torch
from minbert import BertConfig, BertModel
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
torch.manual_seed(1)
try:
    BertModel(BertConfig.tiny()).save_pretrained(sys.argv[1])
except OSError as error:
    print(error.errno, error.filename)
"""


def test_a_file_size_limit_under_save_pretrained_keeps_the_old_folder(tmp_path):
    path = tmp_path / "model"
    tiny(0).save_pretrained(path)
    before = snapshot(path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", SAVE_UNDER_A_SIZE_LIMIT, str(path)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(errno.EFBIG), str(path / "model.safetensors")]  # the file meant
    assert snapshot(path) == before
    nothing_beside(path)


def test_a_save_keeps_the_users_other_files_and_replaces_an_earlier_weights_file(tmp_path):
    """The user's files stay, as transformers' save_pretrained keeps them; a pytorch_model.bin of an earlier
    save goes (the reader would prefer the newer file, but a stale one is not the model saved now)."""
    path = tmp_path / "model"
    tiny(0).save_pretrained(path)
    (path / "notes.md").write_text("how I trained it")
    (path / "eval").mkdir()
    (path / "eval" / "scores.json").write_text("{}")
    (path / "pytorch_model.bin").write_bytes(b"an earlier save's weights")
    tiny(1).save_pretrained(path)
    assert sorted(snapshot(path)) == ["config.json", "eval", "eval/scores.json", "model.safetensors",
                                      "notes.md"]
    assert (path / "notes.md").read_text() == "how I trained it"
    assert (path / "eval" / "scores.json").read_text() == "{}"
    assert torch.equal(BertModel.from_pretrained(path).pooler.dense.weight, tiny(1).pooler.dense.weight)
    nothing_beside(path)


def test_every_file_and_folder_of_a_save_is_flushed_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    flushed, real_fsync = [], os.fsync

    def record(descriptor):
        flushed.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        return real_fsync(descriptor)

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("no /proc/self/fd to name a descriptor's file")
    monkeypatch.setattr(atomic.os, "fsync", record)
    path = tmp_path / "encoder"
    SentenceEncoder(tiny(0), BertTokenizer(VOCAB), device="cpu").save(path)
    written = {p.relative_to(path) for p in path.rglob("*")}
    temporary = {Path(f).parent for f in flushed
                 if Path(f).name == "config.json" and Path(f).parent.name.endswith(".tmp")}
    assert len(temporary) == 1  # the files were flushed in the temporary folder, before its rename
    (folder,) = temporary
    assert {folder / name for name in written} | {folder, tmp_path} <= {Path(f) for f in flushed}


# ----- checkpoints that prove they are whole -----------------------------------------------------------


def run_sentiment(model: Path, out: Path, *extra: str) -> int:
    return sentiment.main(["--model", str(model), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit",
                           "16", "--batch_size", "8", "--epochs", "2", "--max-length", "32",
                           "--keep-checkpoints", *extra])


def flip_a_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def damaged(path: Path) -> str:
    return f"{path} is damaged: its sha256 differs from the one recorded when it was saved"


def two_checkpoints_the_last_damaged(model: Path, out: Path) -> Path:
    """A run stopped at step 1, resumed and stopped at step 2 (last.pt, last.prev.pt); a bit of last.pt
    flipped. Returns last.pt."""
    assert run_sentiment(model, out, "--max-steps", "1") == 0
    assert run_sentiment(model, out, "--max-steps", "2", "--resume") == 0
    last = out / "checkpoints" / "last.pt"
    flip_a_bit(last)
    return last


def test_a_flipped_bit_in_last_pt_is_named_and_resume_goes_on_from_the_earlier_checkpoint(
        tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    last = two_checkpoints_the_last_damaged(tiny_model_dir, out)
    previous = last.with_suffix(".prev.pt")
    whole = previous.read_bytes()
    capsys.readouterr()
    assert run_sentiment(tiny_model_dir, out, "--max-steps", "2", "--resume") == 0
    err = capsys.readouterr().err
    assert f"warning: {damaged(last)}" in err
    assert f"resuming from {previous} (the earlier checkpoint, which is whole), at step 1" in err
    # The damaged file is gone, never kept as the fall-back: last.prev.pt is the whole one it resumed from.
    assert previous.read_bytes() == whole
    assert torch.load(last, weights_only=True)["train_state"]["global_step"] == 2
    verify_folder(out / "checkpoints")


def test_a_damaged_last_pt_with_no_earlier_checkpoint_says_so_and_how_to_start_over(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    assert run_sentiment(tiny_model_dir, out, "--max-steps", "1") == 0
    last = out / "checkpoints" / "last.pt"
    assert not last.with_suffix(".prev.pt").exists()
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # cut in half
    with pytest.raises(SystemExit) as error:
        run_sentiment(tiny_model_dir, out, "--max-steps", "2", "--resume")
    assert str(error.value.code) == (
        f"error: --resume: no whole checkpoint to resume from: {damaged(last)}; this run keeps no earlier "
        f"checkpoint (last.prev.pt comes with the second save); start over: delete {out} (or choose another "
        "--out) and run the command without --resume")


def test_a_folder_in_last_pt_s_place_is_named_not_called_no_checkpoint_yet(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    assert run_sentiment(tiny_model_dir, out, "--max-steps", "1") == 0
    last = out / "checkpoints" / "last.pt"
    last.unlink()
    last.mkdir()  # not "stopped before its first checkpoint": the checkpoint's place holds a folder
    with pytest.raises(SystemExit) as error:
        run_sentiment(tiny_model_dir, out, "--max-steps", "2", "--resume")
    assert f"no whole checkpoint to resume from: {last} is a folder, not a file" in str(error.value.code)


def test_a_loss_gone_nan_after_a_fallback_names_the_whole_checkpoint_not_the_damaged_one(
        tiny_model_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    last = two_checkpoints_the_last_damaged(tiny_model_dir, out)
    real_loss = sentiment.TaskData.loss
    monkeypatch.setattr(sentiment.TaskData, "loss",
                        lambda self, model, batch: real_loss(self, model, batch) * float("nan"))
    with pytest.raises(SystemExit) as error:
        run_sentiment(tiny_model_dir, out, "--max-steps", "3", "--resume")
    assert str(error.value.code).endswith(f"the last good checkpoint is {last.with_suffix('.prev.pt')}")


@pytest.fixture(scope="module")
def finished_run(tiny_multitask_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("saves") / "run"
    assert multitask.main(tiny_multitask_run(out)) == 0
    return out


def test_best_records_its_checksums_in_sha256sums_format(finished_run):
    verify_folder(finished_run / "best")
    if shutil.which("sha256sum"):
        checked = subprocess.run(["sha256sum", "--check", "--quiet", "checksums.sha256"],
                                 cwd=finished_run / "best", capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("name", ["model.safetensors", "heads.safetensors"])
@pytest.mark.parametrize("damage", ["a flipped bit", "cut in half"])
def test_predict_names_a_damaged_best_file_and_reads_nothing_of_it(finished_run, tmp_path, name, damage):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    path = run / "best" / name
    if damage == "a flipped bit":
        flip_a_bit(path)
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(SystemExit) as error:
        multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--limit", "16",
                        "--out", str(tmp_path / "predicted")])
    assert str(error.value.code) == f"error: {damaged(path)}"
    assert not (tmp_path / "predicted").exists()
    with pytest.raises(DamagedFileError):
        verify_folder(run / "best")


def test_a_save_into_the_working_folder_leaves_the_process_working_in_the_new_one(tmp_path, monkeypatch):
    path = tmp_path / "model"
    tiny(0).save_pretrained(path)
    (path / "notes").mkdir()
    monkeypatch.chdir(path / "notes")
    tiny(1).save_pretrained("..")
    assert Path.cwd() == path / "notes" and Path("../config.json").is_file()
    assert torch.equal(BertModel.from_pretrained("..").pooler.dense.weight, tiny(1).pooler.dense.weight)


def test_a_save_through_a_link_to_a_folder_writes_where_the_link_points(tmp_path):
    target, link = tmp_path / "model", tmp_path / "latest"
    tiny(0).save_pretrained(target)
    link.symlink_to(target)
    tiny(1).save_pretrained(link)
    assert link.is_symlink() and link.resolve() == target
    assert torch.equal(BertModel.from_pretrained(target).pooler.dense.weight, tiny(1).pooler.dense.weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "model"]


def test_a_best_folder_saved_before_checksums_were_recorded_is_read_unchecked(finished_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / "best" / "checksums.sha256").unlink()
    assert multitask.main(["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--limit", "16",
                           "--out", str(tmp_path / "predicted")]) == 0


def test_a_resume_names_a_damaged_best_at_once_and_writes_it_anew(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert run_sentiment(tiny_model_dir, out, "--max-steps", "1") == 0
    heads = out / "best" / "heads.safetensors"
    flip_a_bit(heads)
    capsys.readouterr()
    assert run_sentiment(tiny_model_dir, out, "--resume") == 0
    assert f"warning: {damaged(heads)}; best/ is written anew at the next evaluation" in capsys.readouterr().err
    verify_folder(out / "best")

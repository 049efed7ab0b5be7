"""One error boundary per entry point: every fault of the user's files, paths, environment or flags ends a job
in one line naming the path or flag (exit 1; 2 for a usage error) and reaches a library caller as a
MinbertError naming the path or argument; a bug of ours keeps its traceback and says it is one. Each table
row is one kind of fault; the jobs run tasks.sentiment on a tiny model, and fail before any training."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import minbert
from minbert import BertConfig, BertForPreTraining, BertModel, BertTokenizer, SentenceEncoder
from minbert.lora import apply_lora
from minbert.loading.adapter_files import load_adapter, save_adapter
from minbert.loading.errors import FileAccessError
from experiments import study
from pretrain import run as pretrain_run
from tasks import classify, hierarchical, multitask, sentiment, tag
from tasks.data.sources import SAMPLE_DIR
from tasks.training.job import BUG_NOTE, user_errors

REPO = Path(__file__).resolve().parents[1]
JOBS = {"tasks.multitask": multitask.main, "tasks.sentiment": sentiment.main, "tasks.classify": classify.main,
        "tasks.hierarchical": hierarchical.main, "tasks.tag": tag.main, "pretrain.run": pretrain_run.main,
        "experiments.study": study.main}
CUDA_MISSING = not torch.cuda.is_available()


@pytest.fixture
def faults(tmp_path, tiny_model_dir) -> dict[str, Path]:
    """Paths that break in each way: a name longer than the file system allows, a path through a symlink loop,
    and model folders whose weights are cut in half, are not a pickle, are of another size, or whose
    config.json is a JSON list, or whose vocab.txt is a character device."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    paths = {"name too long": tmp_path / ("x" * 300), "symlink loop": tmp_path / "loop" / "run"}

    def model(name: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(tiny_model_dir, folder)
        paths[name] = folder
        return folder

    weights = model("truncated safetensors") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    garbage = model("torch.load of garbage")
    (garbage / "model.safetensors").unlink()
    (garbage / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not a zip" * 10)
    config = model("size mismatch") / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "intermediate_size": 40}))
    (model("config.json a JSON list") / "config.json").write_text("[]")
    device = model("vocab.txt not a regular file") / "vocab.txt"
    device.unlink()
    device.symlink_to("/dev/null")
    return paths


def sentiment_args(model: Path | str, out: Path) -> list[str]:
    return ["--model", str(model), "--data-dir", str(SAMPLE_DIR), "--out", str(out), "--limit", "8",
            "--batch_size", "8", "--epochs", "1", "--max-length", "32"]


def job_failure(capsys, argv: list[str], main=sentiment.main) -> tuple[int, str]:
    """(exit status, the last line on stderr) of a job that must fail without a traceback."""
    with pytest.raises(SystemExit) as error:
        main(argv)
    code = error.value.code
    text = code if isinstance(code, str) else capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in text
    return (1 if isinstance(code, str) else code), text


# ----- jobs -------------------------------------------------------------------------------------------

# (fault, the flag it goes to: --model or --out, exit status, what the line says besides the path)
JOB_FAULTS = [
    ("name too long", "--out", 2, "File name too long"),
    ("symlink loop", "--out", 2, "Too many levels of symbolic links"),
    ("name too long", "--model", 2, "File name too long"),
    ("symlink loop", "--model", 2, "Too many levels of symbolic links"),
    ("truncated safetensors", "--model", 1, "not a readable safetensors file"),
    ("torch.load of garbage", "--model", 1, "not a readable PyTorch file"),
    ("size mismatch", "--model", 1, "shape mismatch"),
    ("config.json a JSON list", "--model", 1, "expected a JSON object"),
    ("vocab.txt not a regular file", "--model", 1, "vocab.txt is not a regular file"),
]


@pytest.mark.parametrize("fault, flag, status, says", JOB_FAULTS, ids=[f"{f} {g}" for f, g, *_ in JOB_FAULTS])
def test_a_jobs_user_fault_is_one_line_naming_the_path_and_leaves_no_folder(faults, tiny_model_dir, tmp_path,
                                                                            capsys, fault, flag, status, says):
    out = faults[fault] if flag == "--out" else tmp_path / "out"
    model = faults[fault] if flag == "--model" else tiny_model_dir
    code, line = job_failure(capsys, sentiment_args(model, out))
    assert code == status and "error: " in line and says in line and str(faults[fault]) in line, line
    assert (f"argument {flag}: " in line) == (status == 2), line  # a usage error names the flag
    assert not (tmp_path / "out").exists()  # nothing was trained: no run folder


@pytest.fixture(scope="module")
def finished_run(tiny_multitask_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    assert multitask.main(tiny_multitask_run(out)) == 0
    return out


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def other_shape(path: Path) -> None:
    heads = load_file(path)
    key = sorted(heads)[0]
    save_file({**heads, key: torch.zeros(3, *heads[key].shape[1:])}, path)


@pytest.mark.parametrize("damage, says", [(cut_in_half, "not a readable safetensors file"),
                                          (other_shape, "of another shape")])
def test_predict_from_damaged_heads_is_one_line_naming_the_file(finished_run, tmp_path, capsys, damage, says):
    run = tmp_path / "run"
    shutil.copytree(finished_run / "best", run / "best")
    (run / "best" / "checksums.sha256").unlink()  # a best/ saved before checksums: the reader names it
    damage(run / "best" / "heads.safetensors")
    code, line = job_failure(capsys, ["--predict", str(run), "--data-dir", str(SAMPLE_DIR), "--out",
                                      str(tmp_path / "predicted"), "--limit", "16"], multitask.main)
    assert code == 1 and f"{run / 'best' / 'heads.safetensors'}: " in line and says in line, line


@pytest.mark.skipif(CUDA_MISSING is False, reason="this PyTorch has CUDA: --use_gpu would train")
def test_use_gpu_without_cuda_is_one_line_naming_the_flag(tiny_model_dir, tmp_path, capsys):
    code, line = job_failure(capsys, sentiment_args(tiny_model_dir, tmp_path / "out") + ["--use_gpu"])
    assert code == 1 and "--use-gpu" in line and "CUDA" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_reads_minbert_traceback_as_a_switch(job, monkeypatch, capsys):
    """Each job's main goes through the one boundary, which reads the switch first: a value that is neither
    on nor off is a usage error naming the variable and its values."""
    monkeypatch.setenv("MINBERT_TRACEBACK", "maybe")
    code, line = job_failure(capsys, ["--help"], JOBS[job])
    assert code == 2 and "MINBERT_TRACEBACK='maybe'" in line and "1, true, yes, on" in line, line


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_jobs_out_through_a_symlink_loop_is_a_usage_error_naming_it(job, tmp_path, capsys):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    out = tmp_path / "loop" / "run"
    code, line = job_failure(capsys, ["--out", str(out)], JOBS[job])
    assert code == 2 and f"argument --out: '{out}': Too many levels of symbolic links" in line, line


@pytest.mark.parametrize("value, traceback", [("", False), ("0", False), ("false", False), ("No", False),
                                              ("off", False), ("1", True), ("TRUE", True), ("yes", True),
                                              ("on", True)])
def test_minbert_traceback_turns_on_only_for_an_on_value(faults, tmp_path, monkeypatch, capsys, value,
                                                         traceback):
    monkeypatch.setenv("MINBERT_TRACEBACK", value)
    argv = sentiment_args(faults["size mismatch"], tmp_path / "out")
    if traceback:
        with pytest.raises(minbert.CheckpointError):
            sentiment.main(argv)
    else:
        assert job_failure(capsys, argv)[0] == 1


def test_a_bug_keeps_its_traceback_and_says_it_is_a_bug(tiny_model_dir, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        return 1 / 0

    monkeypatch.setattr(sentiment, "read_task_data", broken)
    with pytest.raises(ZeroDivisionError) as error:
        sentiment.main(sentiment_args(tiny_model_dir, tmp_path / "out"))
    assert error.value.__notes__ == [BUG_NOTE]


def test_a_bug_in_a_job_run_by_a_study_says_so_once():
    """experiments.study runs each job's main inside its own boundary: the note is added once."""
    with pytest.raises(ZeroDivisionError) as error:
        with user_errors():
            with user_errors():
                1 / 0
    assert error.value.__notes__ == [BUG_NOTE]


def test_a_handouts_unwritten_todo_is_not_called_a_bug():
    """A student's handout stops at a TODO's stub: the traceback ends at it, with no bug line."""
    with pytest.raises(NotImplementedError) as error:
        with user_errors():
            raise NotImplementedError("TODO: minbert/attention.py::eager_attention")
    assert not getattr(error.value, "__notes__", None)


def test_a_bugs_traceback_ends_with_the_bug_line():
    code = "from tasks.training.job import user_errors\nwith user_errors():\n    1 / 0\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), "MINBERT_TRACEBACK": ""})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and lines[0].startswith("Traceback")
    assert lines[-2:] == ["ZeroDivisionError: division by zero", BUG_NOTE]


# ----- the library ------------------------------------------------------------------------------------

LOADERS = {"BertModel.from_pretrained": BertModel.from_pretrained,
           "BertForPreTraining.from_pretrained": BertForPreTraining.from_pretrained,
           "BertConfig.from_pretrained": BertConfig.from_pretrained,
           "BertTokenizer.from_pretrained": BertTokenizer.from_pretrained,
           "SentenceEncoder": lambda path: SentenceEncoder(path, device="cpu"),
           "load_adapter": lambda path: load_adapter(BertModel(BertConfig.tiny()), path)}
# (call, fault, the error's class): every one is a MinbertError whose message names the path
LIBRARY_FAULTS = [(call, fault, FileAccessError) for call in LOADERS if call != "load_adapter"
                  for fault in ("name too long", "symlink loop")]
LIBRARY_FAULTS += [("load_adapter", "name too long", FileAccessError)]
LIBRARY_FAULTS += [(call, fault, minbert.CheckpointError)
                   for call in ("BertModel.from_pretrained", "BertForPreTraining.from_pretrained", "SentenceEncoder")
                   for fault in ("truncated safetensors", "torch.load of garbage", "size mismatch")]
LIBRARY_FAULTS += [(call, "config.json a JSON list", minbert.ConfigError)
                   for call in ("BertModel.from_pretrained", "BertConfig.from_pretrained", "SentenceEncoder")]
LIBRARY_FAULTS += [(call, "vocab.txt not a regular file", minbert.FileContentError)
                   for call in ("BertTokenizer.from_pretrained", "SentenceEncoder")]


@pytest.mark.parametrize("call, fault, kind", LIBRARY_FAULTS, ids=[f"{c} {f}" for c, f, _ in LIBRARY_FAULTS])
def test_a_library_loads_user_fault_is_a_minbert_error_naming_the_path(faults, call, fault, kind):
    with pytest.raises(kind) as error:
        LOADERS[call](faults[fault])
    assert isinstance(error.value, minbert.MinbertError)
    assert str(faults[fault]) in str(error.value)


SAVES = {"save_pretrained": lambda model, path: model.save_pretrained(path),
         "SentenceEncoder.save": lambda model, path: SentenceEncoder(model, BertTokenizer.from_pretrained(
             model.name_or_path), device="cpu").save(path),
         "save_adapter": lambda model, path: (apply_lora(model), save_adapter(model, path))[1]}


@pytest.mark.parametrize("call", sorted(SAVES))
@pytest.mark.parametrize("fault", ["name too long", "symlink loop"])
def test_a_library_saves_refusal_by_the_os_is_a_file_access_error(faults, tiny_model_dir, call, fault):
    with pytest.raises(FileAccessError) as error:
        SAVES[call](BertModel.from_pretrained(tiny_model_dir), faults[fault])
    assert isinstance(error.value, OSError) and error.value.errno in (errno.ENAMETOOLONG, errno.ELOOP)
    message = str(error.value)  # the path given, or a file in it, and the cause
    assert message.startswith(str(faults[fault])) and message.endswith(f": {os.strerror(error.value.errno)}")


def test_a_device_not_present_is_a_device_error_naming_it(tiny_model_dir):
    """CUDA on a CPU-only PyTorch (torch raises AssertionError), or a GPU past the last one (RuntimeError)."""
    absent = "cuda" if CUDA_MISSING else f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(minbert.DeviceError, match=f"device='{absent}' is not available here"):
        SentenceEncoder(tiny_model_dir, device=absent)
    encoder = SentenceEncoder(tiny_model_dir, device="cpu")
    with pytest.raises(minbert.DeviceError, match=f"device='{absent}' is not available here"):
        encoder.encode(["a"], device=absent)


NOT_ROOT = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
UNWRITABLE = """
import errno, sys
import minbert
from minbert import BertConfig, BertModel
model = BertModel(BertConfig.tiny())
try:
    model.save_pretrained(sys.argv[1] + "/model")
except minbert.FileAccessError as error:
    assert error.errno == errno.EACCES, error
    print(error)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to run a process as another user (setpriv); as that user the test "
                           "would be the same")
def test_an_unwritable_folder_is_one_line_as_a_user_who_may_not_write(tiny_model_dir):
    """Root writes anywhere, so the save and the job run as nobody, in a world-readable folder of root's."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    probe = subprocess.run([*NOT_ROOT, sys.executable, "-c", "import minbert, torch"], cwd="/", env=env,
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:  # a checkout or interpreter in a folder private to root (a fresh clone in mktemp's)
        pytest.skip(f"the user nobody cannot import minbert and torch from {REPO}: {probe.stderr.strip()[-200:]}")
    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o755)
        env["HOME"] = str(folder)
        saved = subprocess.run([*NOT_ROOT, sys.executable, "-c", UNWRITABLE, str(folder)], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=120)
        assert saved.returncode == 0 and saved.stdout.strip() == f"{folder}/model: Permission denied", \
            saved.stderr[-2000:]
        job = subprocess.run([*NOT_ROOT, sys.executable, "-m", "tasks.sentiment", "--model", "all-MiniLM-L6-v2",
                              "--data-dir", str(SAMPLE_DIR), "--out", str(folder / "run")], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
        assert job.returncode == 2 and job.stderr.strip().splitlines()[-1].endswith(
            f"error: argument --out: '{folder}/run' is not writable ('{folder}' is read-only to you)"), job.stderr
    finally:
        shutil.rmtree(folder)


# ----- kinds an adversary found: a device in a file's place, the meta device, wrong argument types --------

def test_a_save_never_replaces_a_device_or_pipe_with_a_file(tmp_path):
    from minbert.loading.atomic import atomic_write_text
    from tasks.training.flags import output_file

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(FileAccessError, match="not a regular file"):
        atomic_write_text(fifo, "x")
    assert fifo.is_fifo()  # still the pipe, not a file renamed over it
    with pytest.raises(Exception, match="not a regular file"):
        output_file(str(fifo))  # a prediction flag (--sst_dev_out /dev/full) is refused before any work
    assert output_file(str(tmp_path / "out.csv")) == str(tmp_path / "out.csv")


def test_the_meta_device_is_refused_naming_it(tiny_model_dir):
    with pytest.raises(ValueError, match="device='meta'"):
        SentenceEncoder(tiny_model_dir, device="meta")


def test_adapter_calls_name_an_argument_of_the_wrong_type(tiny_model_dir, tmp_path):
    model = BertModel.from_pretrained(tiny_model_dir)
    apply_lora(model, r=2)
    save_adapter(model, tmp_path / "adapter")
    with pytest.raises(TypeError, match="load_adapter: model must be a torch nn.Module"):
        load_adapter(None, tmp_path / "adapter")
    with pytest.raises(TypeError, match="load_adapter: directory must be a folder's path"):
        load_adapter(BertModel.from_pretrained(tiny_model_dir), None)
    with pytest.raises(TypeError, match="save_adapter: directory"):
        save_adapter(model, 3)


def test_a_checksum_line_naming_a_file_outside_the_folder_is_damage(tmp_path):
    from minbert.loading.atomic import DamagedFileError, read_checksums

    (tmp_path / "checksums.sha256").write_text(f"{'0' * 64}  ../run.json\n")
    with pytest.raises(DamagedFileError, match="checksums.sha256:1 is damaged"):
        read_checksums(tmp_path)


def test_a_ctrl_c_while_a_job_still_imports_is_one_line():
    """`python -m tasks.<job>` sets argv[0] to "-m" while it imports the packages; a SIGINT then (torch takes
    seconds to import) ends the job in one line, exit 130, not a traceback of the import machinery."""
    # Python's own SIGINT handling first: a test run in the background inherits an ignored SIGINT, which the
    # job (rightly) keeps ignoring
    code = ("import os, signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "sys.argv[0] = '-m'\nimport tasks\nos.kill(os.getpid(), signal.SIGINT)\n"
            "import time\ntime.sleep(5)\nprint('not stopped')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == ("interrupted by SIGINT outside the run (while the job imports torch, or after "
                                   "it ended): nothing was being written")


def test_a_save_or_lora_call_given_no_path_or_targets_names_the_argument(tiny_model_dir):
    model = BertModel.from_pretrained(tiny_model_dir)
    with pytest.raises(TypeError, match="the directory to save into must be a path .*got int 123"):
        model.save_pretrained(123)
    with pytest.raises(TypeError, match="the directory to save into must be a path .*got NoneType"):
        SentenceEncoder(tiny_model_dir, device="cpu").save(None)
    with pytest.raises(TypeError, match="LoRA targets must be 'all-linear', a module name or a list"):
        apply_lora(model, targets=None)


def test_a_config_json_that_is_a_symlink_loop_is_named_not_called_missing(tiny_model_dir, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to("config.json")
    with pytest.raises(minbert.MinbertError, match="config.json: cannot read it: Too many levels of symbolic"):
        BertModel.from_pretrained(folder)

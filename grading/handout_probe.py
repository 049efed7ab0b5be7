"""The handout check's child: run in a handout (its folder the working directory, the wheel's files on
PYTHONPATH), it imports what the handout holds and runs the jobs, and prints what happened as one JSON line.

handout.check_handout starts it twice, with its source as `python -c` (so that nothing of grading/ is on
the path): in the student handout and in the same files with the solutions in. Argument: a JSON spec,
{"packages": [...], "jobs": [...], "runs": {job: "flags with {model}, {out}, {sample}, {data}"}, "scratch":
a folder for the tiny model, the runs and the data}. What it reports, under the prefix REPORT:
    errors: a package or module that does not import, a lesson package imported from elsewhere, a name of
            a package's __all__ that cannot be read, a job whose --help does not exit 0;
    helps:  job -> what its --help printed;
    runs:   job -> "finished", "TODO: <file>::<function>" (it stopped at that stub) or the error's
            traceback (the parent decides which of these may happen in which tree).

Read next: handout.py (check_handout).
"""

import contextlib
import importlib
import io
import json
import pkgutil
import runpy
import sys
import traceback
import warnings
from pathlib import Path

REPORT = "HANDOUT-PROBE "
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def run_job(job: str, argv: list[str]) -> str:
    """Run `python -m job argv` in this process: "finished", "TODO: ..." or the error."""
    sys.argv = [job, *argv]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runpy.run_module(job, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        return "finished" if stop.code in (0, None) else f"exit status {stop.code}"
    except Exception as error:  # noqa: BLE001 - reported to the parent, which names the job
        if isinstance(error, NotImplementedError) and str(error).startswith("TODO: "):
            return str(error)
        return traceback.format_exc()[-3000:]
    return "finished"


def tiny_model(where: Path) -> Path:
    """A randomly initialised tiny BERT whose vocabulary is characters: every text tokenizes."""
    from minbert import BertConfig, BertModel, BertTokenizer

    characters = "abcdefghijklmnopqrstuvwxyz0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    vocab = SPECIAL_TOKENS + list(characters) + ["##" + c for c in characters]
    BertModel(BertConfig.tiny(vocab_size=len(vocab))).save_pretrained(where, tokenizer=BertTokenizer(vocab))
    return where


def main() -> None:
    spec = json.loads(sys.argv[1])
    tree, scratch = Path.cwd().resolve(), Path(spec["scratch"])
    errors: list[str] = []
    for name in spec["packages"]:
        try:
            package = importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - a package the tree lacks is no error
            if not (isinstance(error, ModuleNotFoundError) and error.name == name):
                errors.append(f"import {name}:\n{traceback.format_exc()[-3000:]}")
            continue
        if not Path(package.__file__).resolve().is_relative_to(tree):
            errors.append(f"{name} is imported from {package.__file__}, not from the handout")
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001
                errors.append(f"import {info.name}:\n{traceback.format_exc()[-3000:]}")
        for exported in getattr(package, "__all__", ()):
            try:
                getattr(package, exported)
            except Exception as error:  # noqa: BLE001 - a lazy re-export of a module left out
                errors.append(f"{name}/__init__.py exports {exported}, which fails in the handout: "
                              f"{type(error).__name__}: {error}")
    helps = {}
    for job in spec["jobs"]:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            outcome = run_job(job, ["--help"])
        helps[job] = printed.getvalue()
        if outcome != "finished":
            errors.append(f"python -m {job} --help: {outcome}")
    runs = {}
    if spec["runs"] and not errors:
        data = scratch / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "cs224n").symlink_to(tree / "data" / "sample", target_is_directory=True)
        names = {"model": str(tiny_model(scratch / "tiny-model")), "sample": str(tree / "data" / "sample"),
                 "data": str(data)}
        for job, flags in spec["runs"].items():
            argv = [part.format(out=str(scratch / "runs" / job), **names) for part in flags.split()]
            runs[job] = run_job(job, argv)
    sys.stdout.flush()
    print("\n" + REPORT + json.dumps({"errors": errors, "runs": runs, "helps": helps}), flush=True)


if __name__ == "__main__":
    main()

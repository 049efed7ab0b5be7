"""The import rules of docs/architecture.md, checked on the code: every arrow points down.

Imports are read with `ast` from every file (function-level imports included), so a new import that
points up fails here with the file, the line and the rule it breaks. Between packages the layers of the
doc decide; inside a package no two modules may import each other, even through others or from inside a
function; inside minbert/ the lesson files import only the lesson files before them, torch and
minbert/loading/, and every file of minbert/ is in the doc's tables.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from job_modules import DEFAULT, data_dir, modules_loaded

ROOT = Path(__file__).resolve().parents[1]

# Package -> the packages of ours it may import (docs/architecture.md, "The layers").
ALLOWED = {
    "minbert": {"minbert"},
    "optim": {"optim"},
    "tasks": {"tasks", "minbert", "optim"},
    "pretrain": {"pretrain", "tasks", "minbert", "optim"},
    "experiments": {"experiments", "pretrain", "tasks", "minbert", "optim"},
    "grading": {"grading"},
}
OURS = set(ALLOWED) | {"bench", "tests"}
# The modules below them that a package may import beside ALLOWED: grading's flags are checked by the
# same rule as every job's (tasks/training/flags.py), whose numbers are read as the data files' labels are
# (tasks/data/numbers.py); they import only the standard library and each other.
SHARED = {"tasks.training.flags", "tasks.data.numbers"}
# Files that are not imported by their package but run as a child process in another tree: the handout
# check's probe runs inside a built handout and imports what the handout ships, to check that it imports.
CHILD_SCRIPTS = {"grading/handout_probe.py"}

# Inside tasks/: subpackage -> the parts of tasks it may import ("tasks" alone: the jobs at the top).
TASKS_ALLOWED = {
    "tasks.data": {"tasks.data"},
    "tasks.evaluation": {"tasks.evaluation"},
    "tasks.models": {"tasks.models", "tasks.data", "tasks.evaluation"},
    "tasks.training": {"tasks.training", "tasks.data", "tasks.evaluation"},
}
JOBS = ("multitask", "sentiment", "classify", "hierarchical", "tag")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parents, base]).strip(".")
            # `from tasks import metrics` imports the submodule tasks.metrics
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def files_of(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def own_module(name: str, modules: set[str]) -> str | None:
    """The module of ours an imported name lives in (`minbert.model.BertModel` -> `minbert.model`)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def import_graph(package: str) -> dict[str, dict[str, int]]:
    """module -> {module of the same package it imports: the line}, function-level imports included."""
    paths = {module_name(path): path for path in files_of(package)}
    graph: dict[str, dict[str, int]] = {}
    for module, path in paths.items():
        graph[module] = {}
        for line, name in imports(path):
            target = own_module(name, set(paths))
            if target is not None and target != module:
                graph[module].setdefault(target, line)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (a depth-first search)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        path.append(module)
        for target in graph[module]:
            if cycle := visit(target):
                return cycle
        path.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        if cycle := visit(module):
            return cycle
    return None


# The lesson, in the order a student reads it (each file's "Read next" names the next one).
LESSON = ("config", "embeddings", "attention", "layer", "encoder", "model", "heads", "masking", "pooling",
          "task_heads", "label_attention", "metrics")
# The one package outside the lesson that its files may import: loading/, whose base classes load and save
# (as transformers' models inherit PreTrainedModel) and check each forward's arguments once.
LESSON_BASE = "minbert.loading"


def minbert_tables() -> list[str]:
    """The files that docs/architecture.md's minbert/ tables list, as paths below minbert/."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## minbert/", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([\w/]+\.py)` \|", section, flags=re.MULTILINE)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_packages_import_only_what_is_below_them(package):
    wrong = []
    for module in SHARED:  # what makes it safe to share: it imports nothing of ours
        assert not [n for _, n in imports(ROOT / (module.replace(".", "/") + ".py"))
                    if n.split(".")[0] in OURS and not {n, n.rsplit(".", 1)[0]} & SHARED]
    for path in files_of(package):
        if str(path.relative_to(ROOT)) in CHILD_SCRIPTS:
            continue
        for line, name in imports(path):
            top = name.split(".")[0]
            if top in OURS and top not in ALLOWED[package] and not {name, name.rsplit(".", 1)[0]} & SHARED:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not wrong, f"{package}/ may import only {sorted(ALLOWED[package])}:\n" + "\n".join(wrong)


def _tasks_part(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and f"tasks.{parts[1]}" in TASKS_ALLOWED else "tasks"


@pytest.mark.parametrize("subpackage", sorted(TASKS_ALLOWED))
def test_tasks_subpackages_never_import_the_jobs_or_each_other_upwards(subpackage):
    wrong = []
    for path in files_of(subpackage.replace(".", "/")):
        for line, name in imports(path):
            if name.split(".")[0] != "tasks":
                continue
            part = _tasks_part(name)
            if part not in TASKS_ALLOWED[subpackage]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    allowed = sorted(TASKS_ALLOWED[subpackage])
    assert not wrong, f"{subpackage} may import only {allowed}:\n" + "\n".join(wrong)


def test_the_jobs_sit_at_the_top_of_tasks_and_are_runnable_modules():
    for job in JOBS:
        text = (ROOT / "tasks" / f"{job}.py").read_text(encoding="utf-8")
        assert 'if __name__ == "__main__":' in text, f"tasks/{job}.py is not runnable with python -m"
    loose = sorted(p.name for p in (ROOT / "tasks").glob("*.py")
                   if p.stem not in JOBS and p.name != "__init__.py")
    assert not loose, f"tasks/ holds only the jobs; these belong in a subpackage: {loose}"


@pytest.mark.parametrize("package", sorted({*ALLOWED, "bench"}))
def test_no_import_cycle_inside_a_package(package):
    graph = import_graph(package)
    cycle = find_cycle(graph)
    assert cycle is None, f"{package}/ imports in a circle: " + " -> ".join(
        f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_minbert_imports_its_own_modules_only_at_the_top_of_a_file():
    """An import inside a function is how a circle hides; minbert/ has none to hide."""
    late = []
    for path in files_of("minbert"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                late += [f"{path.relative_to(ROOT)}:{node.lineno} in {function.name}()"
                         for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))
                         and any(name.split(".")[0] == "minbert" for name in _names(node))]
    assert not late, "move these imports to the top of the file:\n" + "\n".join(late)


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return ["minbert" if node.level else node.module or ""]  # a relative import inside minbert is ours


def test_the_lesson_files_import_only_earlier_lesson_files_torch_numpy_and_loading():
    wrong = []
    for i, name in enumerate(LESSON):
        earlier = {f"minbert.{other}" for other in LESSON[:i]}
        for line, imported in imports(ROOT / "minbert" / f"{name}.py"):
            top = imported.split(".")[0]
            if top == "minbert":
                ok = bool({imported, imported.rsplit(".", 1)[0]} & earlier) or imported.startswith(
                    LESSON_BASE + ".")
            else:
                ok = top in ("torch", "numpy") or top in sys.stdlib_module_names  # metrics.py is NumPy
            if not ok:
                wrong.append(f"minbert/{name}.py:{line} imports {imported}")
    assert not wrong, ("a lesson file imports only the lesson files before it, torch, NumPy and minbert/loading/ "
                       "(a fast path plugs itself in from outside):\n" + "\n".join(wrong))


@pytest.mark.parametrize("kernel", ["sdpa", "eager"])
def test_a_bert_model_asked_for_no_fast_path_runs_only_the_lesson_and_loading(kernel):
    """The student's code is the code that runs: with the fast paths imported (they must not reach in), a
    BertModel's forward and backward in training mode call functions of the lesson files and loading/ only."""
    import torch

    import minbert.fast.dropout  # noqa: F401 - imported, as a job's process has them
    import minbert.fast.unpadded  # noqa: F401
    from minbert.config import BertConfig
    from minbert.model import BertModel

    model = BertModel(BertConfig.tiny(), attn_implementation=kernel).train()
    ids, mask = torch.randint(1, 99, (2, 5)), torch.tensor([[1] * 5, [1, 1, 1, 0, 0]])
    ran: set[Path] = set()

    def record(frame, event, arg) -> None:
        if event == "call":
            ran.add(Path(frame.f_code.co_filename))

    sys.setprofile(record)
    try:
        model(ids, mask).last_hidden_state.sum().backward()
    finally:
        sys.setprofile(None)
    # Our packages' files only: a checkout's own .venv/ (a fresh clone's) holds torch under ROOT too.
    ours = {path.relative_to(ROOT).as_posix() for path in ran
            if path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in OURS}
    allowed = {f"minbert/{name}.py" for name in LESSON}
    wrong = sorted(f for f in ours if f not in allowed and not f.startswith("minbert/loading/"))
    assert "minbert/attention.py" in ours and not wrong, f"BertModel ran code outside the lesson: {wrong}"


def test_the_lesson_reads_as_one_chain():
    for name, following in zip(LESSON, LESSON[1:]):
        text = (ROOT / "minbert" / f"{name}.py").read_text(encoding="utf-8")
        read_next = re.search(r"^Read next: (\S+)", text, flags=re.MULTILINE)
        assert read_next and read_next.group(1).startswith(f"{following}.py"), (
            f"minbert/{name}.py's 'Read next' should name {following}.py, the next lesson file")


def test_every_minbert_file_is_in_the_docs_tables_and_minbert_holds_only_the_lesson_at_its_top():
    listed = minbert_tables()
    files = sorted(str(path.relative_to(ROOT / "minbert")) for path in files_of("minbert"))
    assert sorted(listed) == files, ("docs/architecture.md's minbert/ tables and the folder differ: only in "
                                     f"the tables {sorted(set(listed) - set(files))}, only in the folder "
                                     f"{sorted(set(files) - set(listed))}")
    top = sorted(path.stem for path in (ROOT / "minbert").glob("*.py"))
    # Beside the lesson: the front door, sentence embeddings in one call, and LoRA (a lesson of the full
    # edition that adapts the model from outside; it imports only torch).
    beside = {"__init__", "sentence_encoder", "lora"}
    assert top == sorted([*LESSON, *beside]), (
        "minbert/'s own files are the lesson and the few beside it; put the others in a subpackage: "
        f"{sorted(set(top) - {*LESSON, *beside})}")


def test_the_shared_data_folder_beside_the_checkout_is_found_without_minbert_data(monkeypatch):
    """tasks/training/job.py finds ../shared/data from its own place in the checkout (a moved file must
    update how many folders up the checkout's parent is)."""
    from tasks.training.job import data_root

    monkeypatch.delenv("MINBERT_DATA", raising=False)
    beside = ROOT.parent / "shared" / "data"
    if beside.is_dir():
        assert data_root(None).resolve() == beside.resolve()
    else:
        with pytest.raises(SystemExit, match=str(beside)):
            data_root(None)


def test_no_job_imports_another_job():
    """A job's code that another job needs belongs in a subpackage (docs/architecture.md, tasks/)."""
    wrong = [f"tasks/{job}.py:{line} imports {name}"
             for job in JOBS for line, name in imports(ROOT / "tasks" / f"{job}.py")
             if any(name == f"tasks.{other}" or name.startswith(f"tasks.{other}.")
                    for other in JOBS if other != job)]
    assert not wrong, "jobs never import each other:\n" + "\n".join(wrong)


@pytest.fixture(scope="module")
def main_job_modules(tmp_path_factory) -> dict[str, list[str]]:
    """The modules of ours a tiny run of the main job with no option loads: at its first training step and
    at its end (job_modules.py); and "kernel", the attention kernel it chose (its config.json)."""
    if not data_dir().is_dir():
        pytest.skip(f"the course data is not at {data_dir()}")
    out = tmp_path_factory.mktemp("main_job") / "run"
    loaded = modules_loaded(DEFAULT[0], list(DEFAULT[1:]), out)
    return {**loaded, "kernel": json.loads((out / "config.json").read_text())["attn_implementation"]}


def source_file(module: str) -> str:
    path = Path(*module.split("."))
    return str(path / "__init__.py" if (ROOT / path).is_dir() else path.with_suffix(".py"))


@pytest.mark.slow
def test_the_main_jobs_way_in_the_docs_is_every_file_it_loads(main_job_modules):
    """docs/architecture.md's hop list names exactly the files a run of `python -m tasks.multitask` loads
    from its start to its end (the job's own file, run as __main__, included), and the fast path of each
    kernel that --attn-implementation auto may choose (KERNEL_MODULES)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## The main job's way", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`((?:minbert|optim|tasks|pretrain)/[\w/]+\.py)`", section))
    run = {source_file(m) for m in main_job_modules["end"]} | {"tasks/multitask.py"}
    other_kernels = {source_file(m) for k, m in KERNEL_MODULES.items() if k != main_job_modules["kernel"]}
    assert not run - listed, f"docs/architecture.md's main-job list lacks {sorted(run - listed)}"
    assert not listed - run - other_kernels, f"docs/architecture.md's main-job list names files the job " \
                                             f"does not load: {sorted(listed - run - other_kernels)}"


@pytest.mark.slow
def test_the_drawn_step_is_the_traced_step(tiny_model_dir, data_dir):
    """docs/architecture.md's drawing of one step names exactly the files of tasks/ that bench/step_path.py's
    trace of the main job enters, from the CSV row to AdamW's step."""
    from bench.step_path import WINDOWS, trace_path

    _, windows = trace_path(["--model", str(tiny_model_dir), "--data-dir", str(data_dir), "--limit", "16"])
    traced = {path for window in WINDOWS for call in windows[window] for path in (call[0], call[2])
              if path and path.startswith("tasks/")}
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## One step's way", 1)[1].split("\n## ", 1)[0]
    drawn = set(re.findall(r"tasks/[\w/]+\.py", section))
    assert not traced - drawn, f"docs/architecture.md's step lacks {sorted(traced - drawn)}"
    assert not drawn - traced, \
        f"docs/architecture.md's step draws files it never enters: {sorted(drawn - traced)}"


def test_every_file_of_the_training_machinery_is_one_concept_of_at_most_about_400_lines():
    """tasks/training/ holds one concept per file (run folder, checkpoints, best/, signals, plot, ...), each
    opening with what it is and ending with where to read next."""
    for path in sorted((ROOT / "tasks" / "training").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        assert lines <= 400, f"{path.relative_to(ROOT)} has {lines} lines; split it by concept"
        doc = ast.get_docstring(ast.parse(text)) or ""
        assert doc and doc.strip().splitlines()[-1].startswith("Read next:"), \
            f"{path.relative_to(ROOT)}'s docstring does not end with 'Read next: ...'"


# Loaded only when a flag asks for them (--lora, --seeds); the main job with no option never
# imports them.
ON_REQUEST = ("minbert.lora", "minbert.loading.adapter_files", "tasks.training.seeds")
# Loaded only once the run writes or reads the file they own, never before the first step: best/'s
# sentence-transformers files (written at the first best epoch).
ON_WRITING = ("minbert.loading.sentence_files",)
# The attention kernel -> the fast path that runs it (--attn-implementation, or what auto chose).
KERNEL_MODULES = {"unpadded": "minbert.fast.unpadded"}


@pytest.mark.slow
def test_the_main_job_with_no_option_loads_no_module_a_flag_must_ask_for(main_job_modules):
    """A real run of the main job (tiny data, one epoch): the modules of ON_REQUEST are never in sys.modules,
    those of ON_WRITING not before the first training step, and a kernel's fast path only where the run
    chose that kernel (auto chooses by the machine)."""
    end = set(main_job_modules["end"])
    assert not end & set(ON_REQUEST), f"the main job with no option loaded {sorted(end & set(ON_REQUEST))}"
    early = set(main_job_modules["first step"]) & set(ON_WRITING)
    assert not early, f"the main job loaded {sorted(early)} before its first step"
    for kernel, module in KERNEL_MODULES.items():
        assert (module in end) == (main_job_modules["kernel"] == kernel), \
            f"{module} loaded: {module in end}, with the {main_job_modules['kernel']} kernel"

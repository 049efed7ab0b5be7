"""What students implement: the graded components, each a list of TODOs (solution regions).

A TODO is named `<file>::<function>`, the file relative to the repository root and the function's
qualified name (`Class.method`); the handout's stubs raise `NotImplementedError("TODO: <that name>")`.
Every `# BEGIN SOLUTION` region in the handout must appear here, and every entry here must have a region:
the handout builder refuses otherwise, so this table and the code cannot drift apart.

Graded tests live in tests/graded/ (shipped to students) and tests/graded/hidden/ (staff only). Each
declares its component and points with pytest markers registered in setup.cfg:

    pytestmark = pytest.mark.component("attention")       # module level: the whole file
    @pytest.mark.points(2)                                # per test: its maximum score
    @pytest.mark.visibility("after_published")            # optional; Gradescope's visibility
    @pytest.mark.todo("AddNorm.forward")                  # which of the component's TODOs it checks
                                                          # (needed where a component has several)

An edition (EDITIONS) is the set of components a course assigns: the handout stubs only their regions
(the other regions ship as working reference code) and the grader runs only their tests.

A whole-model component (WHOLE_MODEL) has no TODO of its own: its tests run the student's whole model
against a real checkpoint's outputs, so they wait for (and catch bugs in) the TODOs of its parts, and
name no @pytest.mark.todo. component_todos() gives the TODOs a component's tests can fail on.

Read next: regions.py.
"""

from __future__ import annotations

# Component -> the TODOs it grades, in the order a student meets them (bottom-up through the model).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "embeddings": ("minbert/embeddings.py::BertEmbeddings.forward",),
    "attention_mask": ("minbert/model.py::extended_attention_mask",),
    "attention": ("minbert/attention.py::attention_scores", "minbert/attention.py::eager_attention"),
    "split_heads": ("minbert/attention.py::BertSelfAttention.split_heads",
                    "minbert/attention.py::BertSelfAttention.merge_heads"),
    "feed_forward": ("minbert/layer.py::BertIntermediate.forward",),
    "layer": ("minbert/layer.py::AddNorm.forward", "minbert/layer.py::BertLayer.forward"),
    "encoder": ("minbert/encoder.py::BertEncoder.forward",),
    "pooler": ("minbert/model.py::BertPooler.forward",),
    "model": (),  # the whole model: see WHOLE_MODEL
    "pretraining_heads": ("minbert/heads.py::BertLMPredictionHead.forward",
                          "minbert/heads.py::masked_lm_loss", "minbert/heads.py::next_sentence_loss"),
    "adamw": ("optim/adamw.py::adamw_update",),
    "schedule": ("optim/schedules.py::linear_warmup_decay_factor",),
    "no_decay": ("optim/param_groups.py::uses_weight_decay",),
    "mean_pool": ("minbert/pooling.py::mean_pool",),
    "max_cls_pool": ("minbert/pooling.py::max_pool", "minbert/pooling.py::pool"),
    "classifier": ("minbert/task_heads.py::SentenceClassifier.forward",
                   "minbert/task_heads.py::classification_loss"),
    "cosine": ("minbert/task_heads.py::cosine_similarity",),
    "mlm_masking": ("minbert/masking.py::maskable_units", "minbert/masking.py::choose_replacement",
                    "minbert/masking.py::mask_tokens", "minbert/masking.py::span_mask"),
    "label_attention": ("minbert/label_attention.py::merge_label_scores",),
    "r_precision": ("minbert/metrics.py::top_labels", "minbert/metrics.py::r_precision"),
    "lora": ("minbert/lora.py::LoRALinear.forward",),
}

# Whole-model component -> the components whose TODOs it runs. The other graded tests use stand-ins so
# that one bug costs one component; these deliberately run the student's everything (as CS224N's
# sanity_check.py does), so a bug in any of the parts costs points here too.
WHOLE_MODEL: dict[str, tuple[str, ...]] = {
    "model": ("embeddings", "attention_mask", "attention", "split_heads", "feed_forward", "layer", "encoder",
              "pooler"),
}

# Edition -> the components students implement; every other region ships as working reference code and
# its tests are neither shipped nor graded. "default" is the course as taught: the model bottom-up, then
# whole against the real checkpoint, its pre-training (masking, the heads and their losses), the optimizer
# and its schedule, and the tasks (sentiment, similarity, label attention, hierarchical metrics). It
# leaves as reading the one-line plumbing a course need not grade (the mask's shape, the head split, the
# FFN, the pooler, max/[CLS] pooling, the no-decay rule) and LoRA; "full" assigns everything.
EDITIONS: dict[str, tuple[str, ...]] = {
    "default": ("embeddings", "attention", "layer", "encoder", "model", "pretraining_heads", "adamw",
                "schedule", "mean_pool", "classifier", "cosine", "mlm_masking", "label_attention",
                "r_precision"),
    "full": tuple(COMPONENTS),
}
DEFAULT_EDITION = "default"

# The packages of a reference tree (mutations.py copies them); which of their files a submission contributes,
# the lesson, is layout.py's.
SUBMITTED_PACKAGES = ("minbert", "optim", "tasks", "pretrain")

GRADED_TESTS = "tests/graded"  # graded tests, shipped to students
HIDDEN_TESTS = "tests/graded/hidden"  # graded tests that the handout leaves out

# Gradescope's visibility values (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
DEFAULT_VISIBILITY = "visible"

# The notebooks the handout holds: pictures of the main job's runs and of label attention's. The tagging
# and structured-layer notebooks read runs on data the handout lacks.
HANDOUT_NOTEBOOKS = ("notebooks/multitask.ipynb", "notebooks/label_attention.ipynb")

# How the handout's check runs a job cheaply, on a tiny random model ({model}), the demo sample ({sample}:
# data/sample; {data}: a folder whose cs224n/ is it) and a fresh folder ({out}): in the student handout it
# must stop at a TODO of the edition (the main job at the first in reading order), with the solutions in it
# must finish. Every other job of the installed part is checked with --help only.
JOB_TINY_RUNS: dict[str, str] = {
    "tasks.multitask": "--model {model} --data-dir {sample} --out {out} --limit 8 --batch_size 4 --epochs 1 "
                       "--max-length 32 --max-steps 2",
    "pretrain.run": "--model {model} --within multitask --data-dir {sample} --out {out} --limit 8 "
                    "--batch-size 4 --epochs 1 --max-length 32 --max-steps 2",
    "tasks.classify": "--model {model} --task cfimdb --data-dir {data} --out {out} --limit 8 --batch_size 4 "
                      "--epochs 1 --max-length 32 --max-steps 2",
}


def todo_component(todo: str) -> str:
    """The component a TODO belongs to (KeyError names it if it is in no component)."""
    for component, todos in COMPONENTS.items():
        if todo in todos:
            return component
    raise KeyError(f"TODO {todo} belongs to no component in grading/config.py COMPONENTS")


def edition_components(edition: str) -> tuple[str, ...]:
    """The edition's components, in COMPONENTS order (KeyError names the editions there are)."""
    if edition not in EDITIONS:
        raise KeyError(f"edition {edition!r} is not one of {sorted(EDITIONS)} (grading/config.py EDITIONS)")
    return tuple(c for c in COMPONENTS if c in EDITIONS[edition])


def component_todos(component: str) -> tuple[str, ...]:
    """The TODOs whose stubs a component's tests can fail on: its own, or a whole-model component's parts'."""
    if component in WHOLE_MODEL:
        return tuple(todo for part in WHOLE_MODEL[component] for todo in COMPONENTS[part])
    return COMPONENTS[component]


def edition_todos(edition: str) -> frozenset[str]:
    """The TODOs the edition stubs: its components' regions."""
    return frozenset(todo for component in edition_components(edition) for todo in COMPONENTS[component])


def _check_editions() -> None:
    without_todos = sorted(c for c, todos in COMPONENTS.items() if not todos)
    if without_todos != sorted(WHOLE_MODEL):
        raise ValueError(f"grading/config.py: the components without TODOs, {without_todos}, must be exactly "
                         f"the whole-model ones, WHOLE_MODEL {sorted(WHOLE_MODEL)}")
    for whole, parts in WHOLE_MODEL.items():
        wrong = [c for c in parts if not COMPONENTS.get(c)]
        if wrong:
            raise ValueError(f"grading/config.py WHOLE_MODEL[{whole!r}] names {wrong}, which are not "
                             "components with TODOs")
    for edition, components in EDITIONS.items():
        unknown = [c for c in components if c not in COMPONENTS]
        if unknown:
            raise ValueError(f"grading/config.py EDITIONS[{edition!r}] names components that are not in "
                             f"COMPONENTS: {unknown}")


_check_editions()

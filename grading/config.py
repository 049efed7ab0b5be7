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

Read next: regions.py.
"""

from __future__ import annotations

# Component -> the TODOs it grades, in the order a student meets them (bottom-up through the model).
COMPONENTS: dict[str, tuple[str, ...]] = {
    "embeddings": ("minbert/embeddings.py::BertEmbeddings.forward",),
    "attention": ("minbert/attention.py::eager_attention",),
    "layer": ("minbert/layer.py::AddNorm.forward", "minbert/layer.py::BertLayer.forward"),
    "encoder": ("minbert/model.py::BertEncoder.forward",),
    "adamw": ("optim/adamw.py::adamw_update",),
    "mean_pool": ("minbert/pooling.py::mean_pool",),
    "cosine": ("tasks/models/heads.py::cosine_similarity",),
    "mlm_masking": ("pretrain/masking.py::maskable_units", "pretrain/masking.py::choose_replacement",
                    "pretrain/masking.py::mask_tokens", "pretrain/masking.py::span_mask"),
    "label_attention": ("minbert/label_attention.py::merge_label_scores",),
    "r_precision": ("tasks/evaluation/metrics.py::r_precision",),
}

# The packages a submission contributes; everything else (tests, setup.cfg, conftest) is the staff copy.
SUBMITTED_PACKAGES = ("minbert", "optim", "tasks", "pretrain")

GRADED_TESTS = "tests/graded"  # graded tests, shipped to students
HIDDEN_TESTS = "tests/graded/hidden"  # graded tests that the handout leaves out

# Gradescope's visibility values (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
DEFAULT_VISIBILITY = "visible"

# What the handout leaves out besides the hidden tests: the grader (its mutations quote the
# solutions), the project's own test files (they would pass or fail regardless of the TODOs), and the
# staff page. README.md is replaced by the student README.
HANDOUT_EXCLUDE_DIRS = ("grading", "tests", ".git", ".venv", "runs", "build", "dist")
HANDOUT_KEEP_TESTS = ("tests/conftest.py",)
HANDOUT_EXCLUDE_FILES = ("docs/teaching.md", "README.md")


def todo_component(todo: str) -> str:
    """The component a TODO belongs to (KeyError names it if it is in no component)."""
    for component, todos in COMPONENTS.items():
        if todo in todos:
            return component
    raise KeyError(f"TODO {todo} belongs to no component in grading/config.py COMPONENTS")

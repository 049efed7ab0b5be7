"""An adversary pass over the grader by someone who did not write it (2026-12-02, commit ae71283).

Three kinds of case, each reusing the machinery of the files that hold the earlier ones:
- hostile submissions (tests/test_grading_hostile.py's `submission`: the handout, one trick, zeros): tricks
  and neighbours that file does not hold (results.json found through /proc and written at import, from
  atexit and from a thread; the graded modules swapped in sys.modules; torch.testing and numpy patched; a
  sibling file the lesson imports; the tests' source, frames and stored tensors read through inspect; a
  fork bomb; a flood on fd 2). Each must score 0 on the component it targets;
- correct alternatives (tests/equivalents.py's `alternative`) written differently from every one there:
  each must earn full marks on its component;
- bugs (tests/fresh_bugs.py's `bug`, its `classify`) outside mutations.py and fresh_bugs.py: each must lose
  points; whether the first message names the mistake is printed (-s) and counted, not asserted.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from equivalents import alternative
from fresh_bugs import bug, classify
from test_grading_hostile import cosine_score, run_grader, running, submission, where  # noqa: F401 - a fixture

from grading.grade import STAFF_ROOT, component_scores, grade
from mutations import mutant

# ----- hostile submissions ---------------------------------------------------------------------------

PROC_RESULTS = """
    import atexit, os, threading, time
    OWN = "OWN_FOLDER"  # the test's folder (see below)
    FORGED = '{"score": 100.0, "tests": [], "output": "hacked"}'
    def out_paths():  # the grader's --out, read from every process's command line
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                words = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
            except OSError:
                continue
            found += [w.decode() for a, w in zip(words, words[1:]) if a == b"--out"]
        for name in ("GRADESCOPE_RESULTS", "RESULTS"):  # or the environment's
            if os.environ.get(name):
                found.append(os.environ[name])
        # Only its own grader's: the suite grades in two workers at once, and where the child runs as the
        # grader's user (see run_grader) it could write another test's results, which Gradescope never runs.
        return [path for path in found if path.startswith(OWN)]
    def forge():
        for path in out_paths():
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(FORGED)
            except OSError:
                pass
    def keep_forging():
        for _ in range(200):
            forge()
            time.sleep(0.02)
    forge()
    atexit.register(forge)
    threading.Thread(target=keep_forging, daemon=False).start()
    """

HOSTILE = {
    "the graded modules swapped in sys.modules: every check a passed property": dict(top="""
        import sys, types
        import graded_helpers as _real
        fake = types.ModuleType("graded_helpers")
        fake.__dict__.update(_real.__dict__)
        def _record(**event):
            event.update(kind="that", actual={"json": True}, message="")
            return _real._record(**event)
        fake._record = _record
        fake._check = lambda kind, actual, expected: _record(kind=kind)
        sys.modules["graded_helpers"] = fake
        import verdict as _verdict
        _verdict.encode = lambda value: {"json": True}
        _verdict.failure = lambda *a, **k: None
        """),
    "torch.testing, numpy's comparisons and torch's reductions patched": dict(top="""
        import numpy, torch, torch.testing
        torch.testing.assert_close = lambda *a, **k: None
        numpy.allclose = numpy.array_equal = lambda *a, **k: True
        numpy.testing.assert_allclose = numpy.testing.assert_array_equal = lambda *a, **k: None
        torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
        torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
        """),
    "the tests' source, frames, module globals and stored tensors read through inspect": dict(body="""
        import glob, inspect, sys
        from safetensors.torch import load_file
        want, seen = u.shape[:-1], []
        for info in inspect.stack():  # the test's frames, their module and its source
            seen += list(info.frame.f_locals.values()) + list(info.frame.f_globals.values())
            try:
                source = inspect.getsource(inspect.getmodule(info.frame))
                seen += [eval(line.split("=", 1)[1]) for line in source.splitlines()
                         if "expected" in line and "=" in line and "torch.tensor" in line]
            except Exception:
                pass
        for path in glob.glob("**/*.safetensors", recursive=True):
            try:
                seen += list(load_file(path).values())
            except Exception:
                pass
        for value in seen:
            if isinstance(value, torch.Tensor) and value.shape == want and value.dtype == u.dtype:
                return value.detach().clone()
        """),
    "a flood on fd 2 and warnings": dict(body="""
        import os, warnings
        for _ in range(20):
            os.write(2, b"\\x1b[2J" + b"z" * 2_000_000)
            warnings.warn("w" * 100_000)
        """),
}


# A sibling the lesson imports: stage() takes the lesson files only, so the child's tree lacks it.
SIBLING = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
HOSTILE["a sibling file it ships, imported by the lesson, patches pytest"] = dict(top="""
    try:
        from minbert import _payload  # noqa: F401
    except ImportError:
        pass
    """, files={"minbert/_payload.py": SIBLING})


@pytest.mark.slow
@pytest.mark.parametrize("trick", list(HOSTILE), ids=lambda name: name.replace(" ", "-")[:40])
def test_a_fresh_trick_in_the_child_raises_no_grade(trick, where):
    options = dict(HOSTILE[trick])
    sub = submission(where / "sub", **{k: options[k] for k in ("top", "body") if k in options})
    for relative, text in options.get("files", {}).items():
        (sub / relative).write_text(text)
    assert cosine_score(sub) == 0


@pytest.mark.slow
def test_results_json_found_through_proc_and_written_early_at_exit_and_from_a_thread_is_the_graders(where):
    out = where / "results" / "results.json"
    os.chmod(where, 0o777)  # a chance: the child's user may create the results folder here
    sub = submission(where / "sub", body=PROC_RESULTS.replace("OWN_FOLDER", str(where)))
    run = run_grader(sub, out)
    assert run.returncode == 0, run.stderr[-2000:]
    time.sleep(1.0)
    text = out.read_text()
    assert "hacked" not in text and json.loads(text)["score"] == 0


@pytest.mark.slow
def test_a_fork_bomb_bounded_by_time_scores_0_and_leaves_nothing(where):
    marker = f"{400 + os.getpid() % 1000}.{time.time_ns() % 10**6:06d}"
    sub = submission(where / "sub", body=f"""
        import subprocess
        for _ in range(400):  # until the process limit says no
            try:
                subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
            except OSError:
                break
        """)
    assert cosine_score(sub) == 0
    assert not running(marker), f"{len(running(marker))} processes left alive"


# ----- correct alternatives written differently --------------------------------------------------------

FRESH_EQUIVALENTS = (
    alternative("scores-einsum-keys-first", "attention",
                "return query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))",
                'return torch.einsum("bhkd,bhqd->bhqk", key, query) * query.size(-1) ** -0.5',
                "einsum with the key first and the indices in another order, times D^-1/2"),
    alternative("embeddings-norm-var-mean", "embeddings",
                "        embeddings = self.dropout(self.LayerNorm(embeddings))\n", """        ln = self.LayerNorm
        var, mean = torch.var_mean(embeddings, dim=-1, correction=0, keepdim=True)
        embeddings = (embeddings - mean) * torch.rsqrt(var + ln.eps) * ln.weight + ln.bias
        embeddings = self.dropout(embeddings)
""", "LayerNorm written out with torch.var_mean(correction=0) and rsqrt"),
    alternative("adamw-add-alpha", "adamw",
                "    exp_avg.lerp_(grad, 1 - beta1)\n", "    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)\n",
                "the first moment as mul_ then add_(alpha=) rather than lerp_"),
    alternative("gelu-ndtr", "feed_forward", 'return F.gelu(self.dense(hidden_states), approximate="none")',
                "x = self.dense(hidden_states)\n        return x * torch.special.ndtr(x)",
                "x Phi(x) with torch.special.ndtr, the normal CDF"),
    alternative("mean-pool-bmm", "mean_pool", """    mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)  # (B, T, 1)
    return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
""", """    weights = attention_mask.to(hidden_states.dtype).unsqueeze(1)  # (B, 1, T)
    total = torch.bmm(weights, hidden_states).squeeze(1)  # (B, C)
    return total / weights.sum(dim=-1).clamp(min=1.0)
""", "the masked sum as a batched matrix product with the mask"),
    alternative("cosine-squared-lengths-clamped", "cosine",
                "return (u * v).sum(dim=-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(min=eps)",
                "return (u * v).sum(-1) / torch.sqrt(((u * u).sum(-1) * (v * v).sum(-1)).clamp(min=eps * eps))",
                "the product of squared lengths clamped at eps^2, then its square root"),
    alternative("pooler-addmm", "pooler", "return torch.tanh(self.dense(hidden_states[:, 0]))",
                "return torch.addmm(self.dense.bias, hidden_states[:, 0], self.dense.weight.t()).tanh()",
                "torch.addmm with the layer's bias and weight"),
)

# ----- bugs outside both catalogues --------------------------------------------------------------------

FRESH = (
    bug("scores-over-sqrt-heads", "attention",
        "return query @ key.transpose(-1, -2) / math.sqrt(query.size(-1))",
        "return query @ key.transpose(-1, -2) / math.sqrt(query.size(1))",
        "scaled by the square root of the number of heads, not of the head size",
        r"sqrt|scal|heads"),
    bug("embeddings-layer-norm-twice", "embeddings", "embeddings = self.dropout(self.LayerNorm(embeddings))",
        "embeddings = self.dropout(self.LayerNorm(self.LayerNorm(embeddings)))", "the LayerNorm applied twice",
        r"twice|LayerNorm.*(again|two)"),
    bug("adamw-lerp-weight-beta1", "adamw", "exp_avg.lerp_(grad, 1 - beta1)", "exp_avg.lerp_(grad, beta1)",
        "the first moment moves by beta1 towards the gradient, not by 1 - beta1", r"beta1|first moment"),
    bug("ffn-adds-its-input", "feed_forward", 'return F.gelu(self.dense(hidden_states), approximate="none")',
        'return F.gelu(self.dense(hidden_states), approximate="none") + hidden_states.mean(-1, keepdim=True)',
        "the intermediate adds (a mean of) its input, a residual where there is none",
        r"residual|input"),
    bug("mean-pool-sqrt-count", "mean_pool", "/ mask.sum(dim=1).clamp(min=1.0)",
        "/ mask.sum(dim=1).clamp(min=1.0).sqrt()",
        "divided by the square root of the token count (sentence-transformers' sqrt_len mode)",
        r"sqrt|square root|count|number of (real )?tokens"),
    bug("cosine-mean-product", "cosine", "return (u * v).sum(dim=-1) /", "return (u * v).mean(dim=-1) /",
        "the dot product as a mean over the features (a factor 1/C)", r"times|factor|1/\d+|mean"),
    bug("pooler-first-sentence", "pooler", "return torch.tanh(self.dense(hidden_states[:, 0]))",
        "return torch.tanh(self.dense(hidden_states[0]))",
        "the first sentence's token vectors, not each sentence's first token", r"first (sentence|sequence)|axis"),
)


def graded_tree(tmp_path: Path, group) -> dict:
    tree = mutant(STAFF_ROOT, group[0], tmp_path / "tree")
    for one in group[1:]:
        one.apply(tree)
    return grade(tree, edition="full", components=sorted({m.component for m in group}))


def test_the_fresh_cases_are_fresh_and_apply_once():
    from equivalents import EQUIVALENTS
    from fresh_bugs import FRESH_BUGS
    from mutations import MUTATIONS
    old = {(m.component, m.new.strip()) for m in EQUIVALENTS + MUTATIONS + FRESH_BUGS}
    for group in (FRESH_EQUIVALENTS, FRESH):
        assert len({m.component for m in group}) == len(group)  # one tree each, one case per component
        for one in group:
            assert (one.component, one.new.strip()) not in old, one.name
            assert (STAFF_ROOT / one.path).read_text().count(one.old) == 1, one.name


@pytest.mark.slow
def test_fresh_correct_alternatives_earn_full_marks(tmp_path):
    results = graded_tree(tmp_path, FRESH_EQUIVALENTS)
    scores, lost = component_scores(results), []
    for one in FRESH_EQUIVALENTS:
        got, total = scores[one.component]
        print(f"{one.name:<34} {got:g} / {total:g}")
        if got != total:
            lost.append(f"{one.name}: {got:g} / {total:g}\n" + "\n".join(
                t["name"] + ": " + t["output"][:600] for t in results["tests"]
                if t["tags"] == [one.component] and t["status"] != "passed"))
    assert not lost, "\n\n".join(lost)


@pytest.mark.slow
def test_fresh_bugs_lose_points_and_their_first_messages_are_counted(tmp_path):
    results = graded_tree(tmp_path, FRESH)
    scores, free, kinds = component_scores(results), [], {}
    for one in FRESH:
        got, total = scores[one.component]
        failed = [t["output"] for t in results["tests"] if t["tags"] == [one.component]
                  and t["status"] == "failed"]
        kind = classify(failed[0], one.message) if failed else "missed"
        kinds.setdefault(kind, []).append(one.name)
        first = failed[0].split("\n\n")[0].replace("\n", " | ")[:300] if failed else "(no test fails)"
        print(f"{kind:<20} {one.name:<28} {got:g}/{total:g} {first}")
        if got >= total:
            free.append(one.name)
    print({kind: len(names) for kind, names in kinds.items()})
    assert not free, f"bugs that cost nothing: {free}"

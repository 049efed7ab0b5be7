"""Teaching tools: the student handout builder and the autograder (Gradescope `results.json`).

    python -m grading.handout OUT_DIR                   write the student repository
    python -m grading.grade --submission DIR --out results.json
    python -m grading.autograder OUT.zip                the Gradescope autograder archive

Staff documentation: docs/teaching.md. Nothing here imports `transformers` (graded tests may).

Read next: config.py (the components and their TODOs), then regions.py, handout.py, grade.py.
"""

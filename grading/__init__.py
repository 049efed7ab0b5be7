"""Teaching tools: the handout builder, the autograder (Gradescope `results.json`), the predictions check.

    python -m grading.handout OUT_DIR                   write the student repository
    python -m grading.grade --submission DIR --out results.json
    python -m grading.autograder OUT.zip                the Gradescope autograder archive
    python -m grading.check_predictions DIR             the course's prediction files, before submitting

The first three take --edition NAME (config.py EDITIONS: which components are TODOs; default "default").

Staff documentation: docs/teaching.md. Nothing here imports `transformers` (graded tests may).

Read next: config.py (the components, their TODOs and the editions), then regions.py, handout.py, grade.py.
"""

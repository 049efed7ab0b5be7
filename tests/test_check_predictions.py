"""grading/check_predictions.py: the course's six prediction files checked against their input files.

Each fault gets its own file set, written in tmp_path: small input files in the course's layout (one index
column in dev files, two in test files, a malformed Quora row) and the predictions the main job's own writer
(tasks/data/course.py write_predictions) makes for them, then one thing broken. Every problem must name
the file, the line and the id where it has them, and make the exit status 1.
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grading import check_predictions
from grading.check_predictions import OUTPUTS, check_folder, main, read_input_ids
from tasks.data.course import TASKS, read_split, write_predictions

REPO = Path(__file__).resolve().parents[1]
DATASET = {"sst": "sst", "para": "quora", "sts": "sts"}  # output prefix -> the course's dataset
GOOD = {"sst": "3", "para": "1", "sts": "2.5"}


def write_inputs(data: Path) -> None:
    """Three ids per file; quora-dev.csv's third row is malformed (no sentence2, no label), as in the
    course's own quora-dev.csv."""
    data.mkdir(parents=True, exist_ok=True)
    (data / "ids-sst-dev.csv").write_text(
        "\tid\tsentence\tsentiment\n0\tsa\t A fine film .\t3\n1\tsb\t \"\"Dull\"\" , said one .\t0\n"
        "2\tsc\t It 's -LRB- fun -RRB- .\t4\n", encoding="utf-8")
    (data / "ids-sst-test-student.csv").write_text(
        "0\t\tid\tsentence\n1\t0.0\tta\t Great .\n2\t1.0\ttb\t Bad .\n3\t2.0\ttc\t So-so .\n",
        encoding="utf-8")
    (data / "quora-dev.csv").write_text(
        "\tid\tsentence1\tsentence2\tis_duplicate\n7\tqa\tHow?\tHow so?\t1.0\n8\tqb\tWhy?\tWhen?\t0.0\n"
        "9\tqbad\t\"\"\"Given a set\"\t\t\n10\tqc\tWho?\tWho is it?\t1.0\n", encoding="utf-8")
    (data / "quora-test-student.csv").write_text(
        "\tid\tsentence1\tsentence2\n1\tua\tA?\tB?\n2\tub\tC?\tD?\n3\tuc\tE?\tF?\n", encoding="utf-8")
    (data / "sts-dev.csv").write_text(
        "\tid\tsentence1\tsentence2\tsimilarity\n1\tda\tA dog.\tA cat.\t1.2\n2\tdb\tOne.\tTwo.\t0.0\n"
        "3\tdc\tHi.\tHello.\t4.8\n", encoding="utf-8")
    (data / "sts-test-student.csv").write_text(
        "\tid\tsentence1\tsentence2\n1\tea\tA.\tB.\n2\teb\tC.\tD.\n3\tec\tE.\tF.\n", encoding="utf-8")


def input_ids(name: str) -> list[str]:
    prefix = {"ids-sst-dev.csv": "s", "ids-sst-test-student.csv": "t", "quora-dev.csv": "q",
              "quora-test-student.csv": "u", "sts-dev.csv": "d", "sts-test-student.csv": "e"}[name]
    return [prefix + letter for letter in "abc"]


@pytest.fixture
def files(tmp_path) -> SimpleNamespace:
    """Inputs in tmp_path/data and passing predictions in tmp_path/predictions, written by the main job's
    writer; `run()` checks them."""
    data, predictions = tmp_path / "data", tmp_path / "predictions"
    write_inputs(data)
    predictions.mkdir()
    for output in OUTPUTS:
        ids = input_ids(output.input_name)
        write_predictions(predictions / output.name, output.column, ids, [GOOD[output.prefix]] * len(ids))

    return SimpleNamespace(data=data, predictions=predictions,
                           run=lambda: main_lines([str(predictions), "--data-dir", str(data)]))


def main_lines(argv: list[str]) -> tuple[int, list[str]]:
    """Run the command line: (exit status, printed lines)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(argv)
    return status, printed.getvalue().splitlines()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (old, text)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def problems_of(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if f"/{name}" in line and ": OK:" not in line]


# ----- files that pass ----------------------------------------------------------------------------------


def test_the_main_jobs_writer_passes_with_one_ok_line_per_file(files):
    status, lines = files.run()
    assert status == 0, lines
    assert len([line for line in lines if ": OK: 3 predictions, one per id of " in line]) == 6, lines
    assert lines[-1].startswith("all 6 files pass")
    para = next(line for line in lines if "para-dev-output.csv" in line)
    assert "1 malformed input row, line 4, that the course skips" in para


def test_a_run_folder_is_checked_through_its_predictions_folder(files):
    status, lines = main_lines([str(files.predictions.parent), "--data-dir", str(files.data)])
    assert status == 0 and "/predictions/sst-dev-output.csv: OK" in lines[0]


def test_crlf_line_endings_a_missing_last_newline_and_float_classes_pass(files):
    sst = files.predictions / "sst-dev-output.csv"
    sst.write_bytes(sst.read_bytes().replace(b"\n", b"\r\n"))
    para = files.predictions / "para-test-output.csv"
    para.write_text("id \t Predicted_Is_Paraphrase \nua , 1.0 \nub , 0.0 \nuc , 1 ", encoding="utf-8")
    status, lines = files.run()
    assert status == 0, lines


def test_a_prediction_for_a_malformed_input_row_is_accepted(files):
    edit(files.predictions / "para-dev-output.csv", "qc , 1 \n", "qc , 1 \nqbad , 0 \n")
    assert files.run()[0] == 0


def test_a_missing_test_input_makes_its_output_optional_and_its_ids_unchecked(files):
    (files.data / "quora-test-student.csv").unlink()
    status, lines = files.run()
    assert status == 0, lines
    assert "para-test-output.csv: OK: 3 predictions, 0 or 1; ids not checked: no quora-test-student.csv" \
        in "\n".join(lines)
    (files.predictions / "para-test-output.csv").unlink()
    status, lines = files.run()
    assert status == 0 and any("para-test-output.csv: not checked" in line for line in lines), lines
    assert lines[-1].startswith("all 5 files pass") and lines[-1].endswith("; 1 not required: no input file")


# ----- each kind of fault -----------------------------------------------------------------------------


def test_a_missing_output_file(files):
    (files.predictions / "sts-test-output.csv").unlink()
    status, lines = files.run()
    assert status == 1
    assert problems_of(lines, "sts-test-output.csv") == [
        f"{files.predictions}/sts-test-output.csv: missing: expected the predictions for the 3 ids of "
        "sts-test-student.csv"]
    assert lines[-1] == "1 of 6 files have problems: fix them before you submit"


def test_an_empty_file_and_a_header_only_file(files):
    (files.predictions / "sst-dev-output.csv").write_text("\n")
    (files.predictions / "sst-test-output.csv").write_text("id \t Predicted_Sentiment \n")
    status, lines = files.run()
    assert status == 1
    assert "sst-dev-output.csv: the file is empty" in problems_of(lines, "sst-dev-output.csv")[0]
    assert problems_of(lines, "sst-test-output.csv") == [
        f"{files.predictions}/sst-test-output.csv: none of the 3 ids of ids-sst-test-student.csv has a "
        "prediction"]


def test_bytes_that_are_not_utf8_name_their_line(files):
    path = files.predictions / "sst-dev-output.csv"
    path.write_bytes(path.read_bytes().replace(b"sb , 3", b"s\xe9 , 3"))
    status, lines = files.run()
    assert status == 1
    assert problems_of(lines, "sst-dev-output.csv") == [
        f"{path}:3: not UTF-8 (byte 0xe9): not a text file of the course's format; write it as UTF-8 text"]


def test_a_binary_file_and_a_spreadsheet_saved_as_text_are_not_the_courses_format(files):
    (files.predictions / "sst-dev-output.csv").write_bytes(b"PK\x03\x04\x00\x00binary")
    (files.predictions / "sts-dev-output.csv").write_text(
        "id\tPredicted_Similiary\nda\t1.0\ndb\t2.0\ndc\t3.0\n", encoding="utf-8")
    status, lines = files.run()
    assert status == 1
    assert "holds NUL bytes" in problems_of(lines, "sst-dev-output.csv")[0]
    sts = problems_of(lines, "sts-dev-output.csv")
    assert sts[0].endswith(":1: header 'id\\tPredicted_Similiary', expected 'id \\t Predicted_Similiary ': "
                           "the spacing differs (the course's: 'id', space, tab, space, the column, space)")
    assert sts[1] == (f"{files.predictions}/sts-dev-output.csv:2: not a line '<id> , <prediction> ': "
                      "'da\\t1.0'")
    assert len(sts) == 5 and "none of the 3 ids of sts-dev.csv" in sts[-1]


def test_header_faults_a_byte_order_mark_another_tasks_column_the_courses_spelling_no_header(files):
    sst = files.predictions / "sst-dev-output.csv"
    sst.write_bytes(b"\xef\xbb\xbf" + sst.read_bytes())
    edit(files.predictions / "para-dev-output.csv", "Predicted_Is_Paraphrase", "Predicted_Sentiment")
    edit(files.predictions / "sts-dev-output.csv", "Predicted_Similiary", "Predicted_Similarity")
    edit(files.predictions / "sts-test-output.csv", "id \t Predicted_Similiary \n", "")
    status, lines = files.run()
    assert status == 1
    assert problems_of(lines, "sst-dev-output.csv") == [
        f"{sst}:1: starts with a UTF-8 byte-order mark, which the course's header has not: save without it"]
    assert problems_of(lines, "para-dev-output.csv")[0].endswith(
        ":1: header 'id \\t Predicted_Sentiment ', expected 'id \\t Predicted_Is_Paraphrase ': that is the "
        "header of sst files; are two files swapped?")
    assert problems_of(lines, "sts-dev-output.csv") == [
        f"{files.predictions}/sts-dev-output.csv:1: header 'id \\t Predicted_Similarity ', expected "
        "'id \\t Predicted_Similiary '"]
    assert problems_of(lines, "sts-test-output.csv") == [  # the first line is still checked as a prediction
        f"{files.predictions}/sts-test-output.csv:1: header 'ea , 2.5 ', expected "
        "'id \\t Predicted_Similiary ': the header line is missing"]


def test_a_line_spaced_otherwise_than_the_courses_names_line_id_and_the_expected_form(files):
    edit(files.predictions / "sst-test-output.csv", "tb , 3 \n", "tb,3\n")
    status, lines = files.run()
    assert status == 1
    assert problems_of(lines, "sst-test-output.csv") == [
        f"{files.predictions}/sst-test-output.csv:3: id 'tb': spacing differs from the course's: found "
        "'tb,3', expected 'tb , 3 ' (space, comma, space, and a space at the end)"]


def test_duplicate_extra_and_missing_ids(files):
    edit(files.predictions / "sst-dev-output.csv", "sc , 3 \n", "sa , 4 \nzz , 1 \nSC , 3 \n")
    status, lines = files.run()
    assert status == 1
    path = f"{files.predictions}/sst-dev-output.csv"
    assert problems_of(lines, "sst-dev-output.csv") == [
        f"{path}:4: id 'sa': a second prediction (the first is on line 2): one line per id",
        f"{path}:5: id 'zz': not an id of ids-sst-dev.csv",
        f"{path}:6: id 'SC': not an id of ids-sst-dev.csv (it has 'sc': ids are case-sensitive)",
        f"{path}: id 'sc': no prediction (it is on line 4 of ids-sst-dev.csv)"]


def test_a_truncated_file_says_how_far_it_goes(files):
    edit(files.predictions / "sts-dev-output.csv", "db , 2.5 \ndc , 2.5 \n", "")
    status, lines = files.run()
    assert status == 1
    assert problems_of(lines, "sts-dev-output.csv") == [
        f"{files.predictions}/sts-dev-output.csv: only the first 1 of the 3 ids of sts-dev.csv (its lines up "
        "to 2) have a prediction: a run with --limit?"]


@pytest.mark.parametrize("prefix, value, why", [
    ("sst", "5", "out of range; expected a whole number 0..4"),
    ("sst", "-1", "out of range; expected a whole number 0..4"),
    ("sst", "2.5", "out of range; expected a whole number 0..4"),
    ("para", "2", "out of range; expected 0 or 1"),
    ("para", "0.7", "out of range; expected 0 or 1"),
    ("sts", "5.01", "out of range; expected a number from 0 to 5"),
    ("sts", "-0.1", "out of range; expected a number from 0 to 5"),
    ("sts", "nan", "not a finite number; expected a number from 0 to 5"),
    ("sts", "inf", "not a finite number; expected a number from 0 to 5"),
    ("sst", "positive", "not a finite number; expected a whole number 0..4"),
    ("para", "True", "not a finite number; expected 0 or 1"),
])
def test_a_prediction_outside_its_tasks_range(files, prefix, value, why):
    name = f"{prefix}-dev-output.csv"
    first = input_ids(next(o.input_name for o in OUTPUTS if o.name == name))[1]
    edit(files.predictions / name, f"{first} , {GOOD[prefix]} \n", f"{first} , {value} \n")
    status, lines = files.run()
    assert status == 1
    assert problems_of(lines, name) == [
        f"{files.predictions}/{name}:3: id '{first}': prediction {value!r} is {why}"]


def test_an_empty_line_and_a_line_with_three_fields(files):
    edit(files.predictions / "para-test-output.csv", "ub , 1 \n", "\nub , 1 , 0 \n")
    status, lines = files.run()
    assert status == 1
    path = f"{files.predictions}/para-test-output.csv"
    assert problems_of(lines, "para-test-output.csv") == [
        f"{path}:3: an empty line: expected '<id> , <prediction> '",
        f"{path}:4: not a line '<id> , <prediction> ': 'ub , 1 , 0 '",
        f"{path}: id 'ub': no prediction (it is on line 3 of quora-test-student.csv)"]


def test_a_flood_of_problems_is_cut_to_a_count(files, monkeypatch):
    monkeypatch.setattr(check_predictions, "SHOWN", 2)
    edit(files.predictions / "sst-dev-output.csv", "sa , 3 \n", "sa , 9 \nx1 , 0 \nx2 , 0 \nx3 , 0 \n")
    status, lines = files.run()
    found = problems_of(lines, "sst-dev-output.csv")
    assert status == 1 and len(found) == 3 and found[-1].endswith(": ... and 2 more problems on other lines")


def test_no_input_files_and_no_folder_are_usage_errors(files, tmp_path, capsys):
    assert main([str(files.predictions), "--data-dir", str(tmp_path)]) == 2
    assert "none of the course's input files" in capsys.readouterr().err
    for argv in ([str(tmp_path / "no-such-folder"), "--data-dir", str(files.data)],
                 [str(files.predictions), "--data-dir", str(tmp_path / "nowhere")]):
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2 and "no such folder" in capsys.readouterr().err


def test_the_data_folder_defaults_to_minbert_data(files, monkeypatch):
    (files.data.parent / "cs224n").symlink_to(files.data)
    monkeypatch.setenv("MINBERT_DATA", str(files.data.parent))
    assert main_lines([str(files.predictions)])[0] == 0


def test_the_command_line_entry_point(files):
    run = subprocess.run([sys.executable, "-m", "grading.check_predictions", str(files.predictions),
                          "--data-dir", str(files.data)], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and run.stdout.splitlines()[-1].startswith("all 6 files pass"), run


# ----- it agrees with the main job, and ships alone -----------------------------------------------------


def test_file_names_and_headers_are_the_main_jobs():
    from tasks import multitask

    headers = {t.name: t.header for t in multitask.TASKS}
    assert {t.name: t.dataset for t in multitask.TASKS} == DATASET
    for output in OUTPUTS:
        assert output.input_name == TASKS[DATASET[output.prefix]].files[output.split]
        assert output.header == f"id \t {headers[output.prefix]} "
    assert {o.name for o in OUTPUTS} == {f"{p}-{s}-output.csv" for p in DATASET for s in ("dev", "test")}


def test_it_imports_only_the_standard_library_and_the_flag_types_so_it_ships_alone():
    tree = ast.parse((REPO / "grading" / "check_predictions.py").read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    ours = {name for name in names if name.split(".")[0] not in sys.stdlib_module_names}
    assert ours == {"tasks.training.flags"}, ours  # tests/test_architecture.py: standard library only


def test_the_student_readme_says_to_run_it_before_submitting_and_the_handout_installs_it():
    from grading.documents import student_readme
    from grading.layout import layout

    readme = student_readme("default", [])
    assert "`.venv/bin/python -m grading.check_predictions runs/multitask/<date-time>`" in readme
    split = layout(REPO, "default")
    grading = [f for f in split.machinery + split.lesson if f.startswith("grading/")]
    assert grading == ["grading/check_predictions.py"]  # installed with the wheel; no other file of grading/


@pytest.mark.slow
def test_the_main_jobs_own_prediction_files_pass(tiny_multitask_run, tmp_path):
    """A whole run of the main job (the tiny model, two steps) on the bundled sample, every row predicted."""
    from tasks import multitask
    from tasks.data.sources import SAMPLE_DIR

    out = tmp_path / "run"
    assert multitask.main(tiny_multitask_run(out, "--limit", "0")) == 0
    status, lines = main_lines([str(out), "--data-dir", str(SAMPLE_DIR)])
    assert status == 0, lines


# ----- the course's own files ---------------------------------------------------------------------------


@pytest.mark.data
def test_on_the_courses_files_ids_are_the_main_jobs_and_full_size_files_check_quickly(data_dir, tmp_path):
    course = data_dir / "cs224n"
    present = [o for o in OUTPUTS if (course / o.input_name).is_file()]
    assert len(present) >= 5, f"expected the course's input files in {course}"
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    for output in present:
        read = read_split(course, DATASET[output.prefix], output.split)
        ids = read_input_ids(course / output.input_name)
        assert list(ids.required) == [e.id for e in read.examples], output.input_name
        assert sorted(ids.optional.values()) == [row.line for row in read.skipped], output.input_name
        values = [round(math.sin(i) ** 2 * 4.99, 3) if output.prefix == "sts" else i % (5 if output.prefix ==
                  "sst" else 2) for i in range(len(read.examples))]
        write_predictions(predictions / output.name, output.column, [e.id for e in read.examples], values)
    start = time.perf_counter()
    reports = check_folder(predictions, course)
    assert time.perf_counter() - start < 5.0  # about 8,000 lines: a fraction of a second
    assert all(not report.problems for report in reports), [r.problems for r in reports]
    edit(predictions / "sst-dev-output.csv", "\n", "\nnot-an-id , 2 \n")
    assert check_folder(predictions, course)[0].problems == [
        f"{predictions}/sst-dev-output.csv:2: id 'not-an-id': not an id of ids-sst-dev.csv"]

"""Tests for tasks/data/ (examples.py, course.py, sources.py): the course files' readers, the crafted bad
files, the download, the sample.

The shared course files give exact row counts (SOURCE.txt) and the exact malformed Quora rows; the
bad files are written here, one fault each; the download runs against a file server on 127.0.0.1.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import importlib.util
import io
import socket
import threading
from pathlib import Path

import pytest

from tasks.data import course, sources
from tasks.data.course import read_quora, read_split, read_sst, read_sts, read_task, task_files, unescape_ptb
from tasks.data.examples import DataFileError, MalformedRowError, PairExample, SentenceExample
from tasks.data.sources import (DownloadError, checksum_matches, download_course_data, resolve_data_dir,
                                urllib_fetch)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"

# ----------------------------------------------------------------------------------------------------
# The shared course files
# ----------------------------------------------------------------------------------------------------

# Data rows per file of the course's own files, byte-identical to the course's (SOURCE.txt). The shared Quora
# files are a re-split whose size the data owner changes (SOURCE.txt: "Code must not assume the course's
# sizes"), so their rows are counted off the file itself: one line per row, after the header.
SHARED_ROWS = {
    ("sst", "train"): 8544, ("sst", "dev"): 1101, ("sst", "test"): 2210,
    ("cfimdb", "train"): 1707, ("cfimdb", "dev"): 245, ("cfimdb", "test"): 488,
    ("sts", "train"): 6040, ("sts", "dev"): 863, ("sts", "test"): 1725,
    ("quora", "train"): None, ("quora", "dev"): None,
}
# Malformed rows of the shared Quora files, found by reading them: (file, line, reason). They are in the
# part of each file that SOURCE.txt says stays; rows added later may bring more, each checked on its own.
SHARED_QUORA_MALFORMED = {
    "train": [("quora-train.csv", 2036, "empty is_duplicate")],
    "dev": [("quora-dev.csv", 1397, "empty sentence2; empty is_duplicate")],
}


def data_lines(path: Path) -> list[str]:
    """The file's rows as text, header dropped (no shared file has a field spanning lines)."""
    return path.read_text(encoding="utf-8").splitlines()[1:]


def really_malformed(line: str) -> bool:
    """A Quora row a reader must skip: not five tab-separated fields, or an empty one after the index."""
    fields = line.split("\t")
    return len(fields) != 5 or any(not field.strip() for field in fields[1:])


@pytest.fixture(scope="module")
def course_dir(data_dir: Path) -> Path:
    return data_dir / "cs224n"


@pytest.mark.data
@pytest.mark.parametrize("task, split", sorted(SHARED_ROWS))
def test_shared_files_read_to_the_row_counts_of_source_txt(course_dir, task, split):
    result = read_split(course_dir, task, split)
    skipped = [(row.path.name, row.line, row.reason) for row in result.skipped]
    if task != "quora":
        assert len(result) + len(result.skipped) == SHARED_ROWS[task, split]
        assert skipped == []
    else:
        lines = data_lines(course_dir / f"quora-{split}.csv")
        assert len(result) + len(result.skipped) == len(lines)
        assert set(SHARED_QUORA_MALFORMED[split]) <= set(skipped)
        # Every skipped row is really malformed (line numbers count the header as line 1).
        assert all(really_malformed(lines[line - 2]) for _, line, _ in skipped)
    assert len({example.id for example in result}) == len(result)  # ids are unique
    if split == "test":
        assert all(example.label is None for example in result)


@pytest.mark.data
def test_shared_quora_malformed_rows_are_reported_with_file_line_and_count(course_dir):
    result = read_quora(course_dir / "quora-train.csv")
    report = result.report()
    assert f"read {len(result)} examples" in report
    assert f"skipped {len(result.skipped)} malformed row(s)" in report and len(result.skipped) >= 1
    assert f"{course_dir / 'quora-train.csv'}:2036: empty is_duplicate" in report


@pytest.mark.data
def test_shared_quora_in_strict_mode_stops_at_the_first_malformed_row(course_dir):
    with pytest.raises(MalformedRowError, match=r"quora-dev\.csv:1397: empty sentence2") as caught:
        read_quora(course_dir / "quora-dev.csv", strict=True)
    assert caught.value.line == 1397 and caught.value.path.name == "quora-dev.csv"


@pytest.mark.data
def test_shared_labels_have_the_documented_types_and_ranges(course_dir):
    sst = read_split(course_dir, "sst", "train")
    assert {example.label for example in sst} == {0, 1, 2, 3, 4}
    quora = read_split(course_dir, "quora", "train")
    assert {type(example.label) for example in quora} == {int}
    assert {example.label for example in quora} == {0, 1}
    sts = read_split(course_dir, "sts", "train")
    assert all(isinstance(example.label, float) for example in sts)
    assert min(example.label for example in sts) == 0.0 and max(example.label for example in sts) == 5.0


@pytest.mark.data
def test_shared_csv_quoting_is_undone_once_and_sentences_are_stripped(course_dir):
    sts = read_split(course_dir, "sts", "train")
    sentences = [s for example in sts for s in (example.sentence1, example.sentence2)]
    assert any('"' in s for s in sentences), "the STS file has CSV-quoted fields"
    assert not any('""' in s for s in sentences)  # a doubled quote would mean we did not unquote
    assert all(s == s.strip() for s in sentences)
    # The course quoted Quora's (and CFIMDB's) text twice; like the course's reader we undo one level.
    # A field quoted twice holds a quadrupled quote in the file; after one level a doubled one remains.
    quora = read_split(course_dir, "quora", "train")
    twice = sum('""""' in field for line in data_lines(course_dir / "quora-train.csv")
                for field in line.split("\t")[2:4])
    assert twice > 0
    assert sum('""' in s for example in quora for s in (example.sentence1, example.sentence2)) == twice


@pytest.mark.data
def test_shared_sst_keeps_treebank_escapes_unless_asked(course_dir):
    raw = read_split(course_dir, "sst", "train")
    assert sum("-LRB-" in example.sentence for example in raw) > 100
    clean = read_split(course_dir, "sst", "train", ptb_unescape=True)
    assert not any(escape in example.sentence for example in clean for escape in ("-LRB-", "``", "\\/"))


@pytest.mark.data
def test_pinned_checksums_match_the_shared_course_files(course_dir):
    # The shared Quora files are a re-split, so only the other nine are byte-identical to the pins.
    for name, pin in sources.COURSE_CHECKSUMS.items():
        if not name.startswith("quora"):
            assert checksum_matches((course_dir / name).read_bytes(), pin), name


# ----------------------------------------------------------------------------------------------------
# Crafted bad files
# ----------------------------------------------------------------------------------------------------

SST_HEADER = "\tid\tsentence\tsentiment\n"


def write(tmp_path: Path, text: str | bytes, name: str = "ids-sst-train.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def sst_file(tmp_path: Path, *rows: str) -> Path:
    good = "0\taaa\t A fine film .\t3\n"
    return write(tmp_path, SST_HEADER + good + "".join(rows))


def test_a_well_formed_sst_file_reads_to_stripped_examples(tmp_path):
    path = sst_file(tmp_path, "1\tbbb\t`` Odd '' -LRB- sic -RRB- \t0\n")
    result = read_sst(path)
    assert result.examples == (SentenceExample("aaa", "A fine film .", 3),
                               SentenceExample("bbb", "`` Odd '' -LRB- sic -RRB-", 0))
    assert result.skipped == ()
    assert read_sst(path, ptb_unescape=True).examples[1].sentence == '" Odd " ( sic )'


def test_a_missing_file_is_a_file_not_found_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        read_sst(tmp_path / "nope.csv")


def test_an_empty_file_is_an_error(tmp_path):
    with pytest.raises(DataFileError, match="empty"):
        read_sst(write(tmp_path, ""))


def test_a_header_without_rows_is_an_error(tmp_path):
    with pytest.raises(DataFileError, match="header but no rows"):
        read_sst(write(tmp_path, SST_HEADER))


def test_a_wrong_header_is_an_error_naming_line_1_and_the_expected_columns(tmp_path):
    path = write(tmp_path, "\tid\ttext\tlabel\n0\taaa\tok\t1\n")
    with pytest.raises(DataFileError, match=r"ids-sst-train\.csv:1: wrong header.*id, sentence, sentiment"):
        read_sst(path)


def test_a_comma_separated_file_is_told_so_not_called_a_wrong_header(tmp_path):
    path = write(tmp_path, ",id,sentence,sentiment\n0,aaa,Fine .,1\n")
    with pytest.raises(DataFileError, match=r"ids-sst-train\.csv:1: this file is comma-separated; the course "
                                            r"files are tab-separated \(found the header ',id,sentence,"):
        read_sst(path)


def test_a_test_file_read_as_labelled_gets_a_hint(tmp_path):
    path = write(tmp_path, "0\t\tid\tsentence\n1\t0.0\taaa\t Fine .\n")
    with pytest.raises(DataFileError, match="labelled=False"):
        read_sst(path)
    assert read_sst(path, split_has_labels=False).examples == (SentenceExample("aaa", "Fine .", None),)


@pytest.mark.parametrize("row, reason", [
    ("1\tbbb\t Too few fields .\n",
     "expected 4 tab-separated fields (index, id, sentence, sentiment), found 3"),
    ("1\tbbb\t Extra .\t2\tx\n", "found 5"),
    ("1\tbbb\t Empty label .\t\n", "empty sentiment"),
    ("1\tbbb\t Words .\tthree\n", "sentiment 'three' is not a number"),
    ("1\tbbb\t Out of range .\t7\n", "sentiment '7' is out of range (allowed: 0, 1, 2, 3, 4)"),
    ("1\tbbb\t Half a star .\t2.5\n", "sentiment '2.5' is not a whole number"),
    ("1\tbbb\t\t2\n", "empty sentence"),
    ("1\t\t No id .\t2\n", "empty id"),
    ("1\taaa\t Same id .\t2\n", "duplicate id 'aaa' (first on line 2)"),
    ("1\tbbb\t\"quoted\"tail\t2\n", "broken CSV quoting"),
    ("\n", "empty line"),
])
def test_a_malformed_row_is_skipped_and_reported_with_its_line(tmp_path, row, reason):
    path = sst_file(tmp_path, row, "2\tccc\t Still read .\t4\n")
    result = read_sst(path)
    assert [example.id for example in result] == ["aaa", "ccc"]  # the rows after it are still read
    assert len(result.skipped) == 1
    skipped = result.skipped[0]
    assert (skipped.path, skipped.line) == (path, 3) and reason in skipped.reason
    assert f"{path}:3: " in result.report() and "skipped 1 malformed row(s)" in result.report()


def test_strict_mode_raises_a_value_error_naming_file_and_line(tmp_path):
    path = sst_file(tmp_path, "1\tbbb\t Fine .\t1\n", "2\tccc\t Bad .\t9\n")
    with pytest.raises(MalformedRowError) as caught:
        read_sst(path, strict=True)
    assert isinstance(caught.value, ValueError)
    assert (caught.value.path, caught.value.line) == (path, 4)
    assert f"{path}:4: sentiment '9' is out of range" in str(caught.value)


def test_an_unbalanced_quote_that_swallows_lines_is_reported_where_it_starts(tmp_path):
    path = sst_file(tmp_path, '1\tbbb\t"never closed .\t1\n', "2\tccc\t Swallowed .\t1\n")
    result = read_sst(path)
    assert [example.id for example in result] == ["aaa"]
    assert result.skipped[0].line == 3 and "lines 3-4" in result.skipped[0].reason


def test_non_utf8_bytes_are_an_error_naming_the_line_and_byte_offset(tmp_path):
    head = (SST_HEADER + "0\taaa\t Fine .\t3\n").encode()
    path = write(tmp_path, head + b"1\tbbb\t Caf\xe9 .\t3\n")
    offset = len(head) + len(b"1\tbbb\t Caf")
    with pytest.raises(DataFileError, match=rf"ids-sst-train\.csv:3: not UTF-8 .*e9 at byte offset {offset}"):
        read_sst(path)


def test_a_file_whose_rows_are_all_malformed_is_an_error(tmp_path):
    with pytest.raises(DataFileError, match="all 2 data rows are malformed"):
        read_sst(write(tmp_path, SST_HEADER + "0\taaa\t A .\t\n1\tbbb\t B .\tx\n"))


def test_pair_files_parse_quoting_labels_and_both_test_index_layouts(tmp_path):
    quora = write(tmp_path, '\tid\tsentence1\tsentence2\tis_duplicate\n'
                            '0\taaa\t"What is ""x""?"\tWhat is x?\t1.0\n'
                            '1\tbbb\tA?\tB?\t2.0\n', "quora-dev.csv")
    result = read_quora(quora)
    assert result.examples == (PairExample("aaa", 'What is "x"?', "What is x?", 1),)
    assert "is_duplicate '2.0' is out of range (allowed: 0, 1)" in result.skipped[0].reason
    doubled = write(tmp_path, "0\t\tid\tsentence1\tsentence2\n1\t0.0\taaa\tA?\tB?\n", "quora-test.csv")
    single = write(tmp_path, "\tid\tsentence1\tsentence2\n0\taaa\tA.\tB.\n", "sts-test.csv")
    assert read_quora(doubled, split_has_labels=False).examples == (PairExample("aaa", "A?", "B?", None),)
    assert read_sts(single, split_has_labels=False).examples == (PairExample("aaa", "A.", "B.", None),)


@pytest.mark.parametrize("label, problem", [("5.5", "out of range (allowed: 0 to 5)"),
                                            ("nan", "not a finite number"), ("-0.1", "out of range")])
def test_sts_scores_outside_0_to_5_are_malformed(tmp_path, label, problem):
    path = write(tmp_path, f"\tid\tsentence1\tsentence2\tsimilarity\n0\taaa\tA.\tB.\t4.2\n"
                           f"1\tbbb\tA.\tC.\t{label}\n", "sts-dev.csv")
    result = read_sts(path)
    assert result.examples[0].label == pytest.approx(4.2)
    assert problem in result.skipped[0].reason


def test_an_unknown_task_or_split_names_the_allowed_values(tmp_path):
    with pytest.raises(ValueError, match="allowed: sst, cfimdb, quora, sts"):
        read_task("imdb", tmp_path / "x.csv")
    with pytest.raises(ValueError, match="allowed: train, dev, test"):
        task_files(["sst"], ["validation"])


def test_unescape_ptb_worked_example():
    text = "`` Hi '' -LRB- a -RRB- -LSB- b -RSB- -LCB- c -RCB- and\\/or 5\\*"
    assert unescape_ptb(text) == '" Hi " ( a ) [ b ] { c } and/or 5*'


# ----------------------------------------------------------------------------------------------------
# Download (offline: a file server on 127.0.0.1) and where the data comes from
# ----------------------------------------------------------------------------------------------------

FILES = ["ids-sst-dev.csv", "quora-dev.csv"]
CONTENT = {"ids-sst-dev.csv": (SST_HEADER + "0\taaa\t Served .\t2\n").encode(),
           "quora-dev.csv": b"\tid\tsentence1\tsentence2\tis_duplicate\n0\taaa\tA?\tB?\t0.0\n"}


def git_blob(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


# One file pinned by sha256, the other by git blob id: the verifier accepts either.
PINS = {"ids-sst-dev.csv": "sha256:" + hashlib.sha256(CONTENT["ids-sst-dev.csv"]).hexdigest(),
        "quora-dev.csv": "gitblob:" + git_blob(CONTENT["quora-dev.csv"])}


@pytest.fixture
def file_server(tmp_path):
    """Serve tmp_path/served/data/ over HTTP on 127.0.0.1; yield (folder, base URL)."""
    folder = tmp_path / "served" / "data"
    folder.mkdir(parents=True)
    for name, content in CONTENT.items():
        (folder / name).write_bytes(content)

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=str(tmp_path / "served"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}/data/"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def pinned_to(monkeypatch):
    """Point the module's pins at a base URL and at PINS, as a fork of the course repo would."""
    def pin(base_url: str) -> None:
        monkeypatch.setattr(sources, "COURSE_BASE_URL", base_url)
        monkeypatch.setattr(sources, "COURSE_CHECKSUMS", PINS)
    return pin


def unreachable_url() -> str:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/data/"


def test_checksum_pins_accept_sha256_and_git_blob_ids():
    assert checksum_matches(b"hello\n", "gitblob:ce013625030ba8dba906f756967f9e9ca394464a")  # git hash-object
    assert checksum_matches(b"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert not checksum_matches(b"hello", "gitblob:ce013625030ba8dba906f756967f9e9ca394464a")
    with pytest.raises(ValueError, match="allowed: sha256, gitblob"):
        checksum_matches(b"", "md5:d41d8cd98f00b204e9800998ecf8427e")


def test_every_course_file_is_pinned_at_the_pinned_commit():
    assert set(task_files(course.TASKS)) == set(sources.COURSE_CHECKSUMS)
    assert sources.COURSE_COMMIT in sources.COURSE_BASE_URL


def test_download_writes_the_files_that_pass_their_checksums(tmp_path, file_server):
    _, url = file_server
    dest = tmp_path / "dest"
    paths = download_course_data(dest, FILES, base_url=url, checksums=PINS, log=io.StringIO())
    assert [path.read_bytes() for path in paths] == [CONTENT[name] for name in FILES]


def test_download_rejects_a_checksum_mismatch_and_writes_nothing(tmp_path, file_server):
    folder, url = file_server
    (folder / "quora-dev.csv").write_bytes(CONTENT["quora-dev.csv"] + b"1\tbbb\tTampered?\tYes?\t1.0\n")
    dest = tmp_path / "dest"
    with pytest.raises(DownloadError, match="quora-dev.csv: checksum mismatch"):
        download_course_data(dest, FILES, base_url=url, checksums=PINS, log=io.StringIO())
    assert not dest.exists() or list(dest.iterdir()) == []  # not even the good file, nor a temp file


def test_download_of_a_missing_url_is_a_download_error(tmp_path, file_server):
    _, url = file_server
    with pytest.raises(DownloadError, match="404"):
        urllib_fetch(url + "not-there.csv", timeout=5)


def test_download_keeps_files_already_verified(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    for name in FILES:
        (dest / name).write_bytes(CONTENT[name])

    def no_network(url: str, timeout: float) -> bytes:
        raise AssertionError(f"fetched {url} although it was already there")

    download_course_data(dest, FILES, fetch=no_network, checksums=PINS, log=io.StringIO())


def make_dirs(tmp_path: Path, *names: str) -> list[Path]:
    """Folders holding FILES, for the places resolve_data_dir looks."""
    folders = []
    for name in names:
        folder = tmp_path / name
        folder.mkdir(parents=True)
        for file in FILES:
            (folder / file).write_bytes(CONTENT[file])
        folders.append(folder)
    return folders


def test_resolve_prefers_data_dir_then_env_then_local(tmp_path):
    given, env_cs224n, local = make_dirs(tmp_path, "given", "env/cs224n", "local")
    env = {"MINBERT_DATA": str(tmp_path / "env")}
    source = resolve_data_dir(given, FILES, env=env, local_dir=local, download=False)
    assert (source.kind, source.path) == ("given", given) and str(given) in source.description
    assert resolve_data_dir(tmp_path / "env", FILES, env={}, download=False).path == env_cs224n
    assert resolve_data_dir(None, FILES, env=env, local_dir=local).kind == "env"
    assert resolve_data_dir(None, FILES, env={}, local_dir=local).kind == "local"


def test_resolve_with_a_data_dir_lacking_files_is_an_error_not_a_fallback(tmp_path):
    with pytest.raises(FileNotFoundError, match="--data-dir .*missing ids-sst-dev.csv, quora-dev.csv"):
        resolve_data_dir(tmp_path, FILES, env={})


def test_resolve_downloads_when_no_folder_holds_the_files(tmp_path, file_server, pinned_to):
    _, url = file_server
    pinned_to(url)
    local = tmp_path / "local"
    log = io.StringIO()
    source = resolve_data_dir(None, FILES, env={}, local_dir=local, log=log)
    assert (source.kind, source.path) == ("downloaded", local)
    assert read_split(local, "sst", "dev").examples[0].sentence == "Served ."
    assert "downloading" in log.getvalue()


def test_resolve_falls_back_to_the_sample_loudly_when_the_download_fails(tmp_path, pinned_to):
    pinned_to(unreachable_url())  # the real urllib fetch, refused: what "no network" looks like
    local = tmp_path / "local"
    log = io.StringIO()
    source = resolve_data_dir(None, FILES, env={}, local_dir=local, log=log)
    assert source.kind == "sample" and source.is_sample and source.path == sources.SAMPLE_DIR
    assert "SYNTHETIC DEMO DATA" in log.getvalue() and "DownloadError" in log.getvalue()
    assert "SYNTHETIC DEMO DATA" in source.description and "mean nothing" in source.description
    assert not local.exists() or list(local.iterdir()) == []


def test_resolve_without_download_uses_the_sample_and_says_why(tmp_path):
    log = io.StringIO()
    source = resolve_data_dir(None, FILES, env={}, local_dir=tmp_path / "local", download=False, log=log)
    assert source.kind == "sample" and "downloading is switched off" in log.getvalue()


def test_resolve_with_files_nowhere_at_all_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not-a-course-file.csv"):
        resolve_data_dir(None, ["not-a-course-file.csv"], env={}, local_dir=tmp_path, download=False,
                         log=io.StringIO())


# ----------------------------------------------------------------------------------------------------
# The synthetic sample set
# ----------------------------------------------------------------------------------------------------

SAMPLE_SIZES = {"sst": (240, 80, 80), "cfimdb": (150, 50, 50), "quora": (240, 80, 80), "sts": (240, 80, 80)}


@pytest.mark.parametrize("task", sorted(SAMPLE_SIZES))
def test_the_sample_parses_strictly_with_the_advertised_sizes(task):
    sizes = tuple(len(read_split(SAMPLE, task, split, strict=True)) for split in course.SPLITS)
    assert sizes == SAMPLE_SIZES[task]


def test_the_sample_covers_every_label_and_the_course_quirks():
    sst = read_split(SAMPLE, "sst", "train")
    assert {example.label for example in sst} == {0, 1, 2, 3, 4}
    assert any("-LRB-" in example.sentence for example in sst)
    assert {example.label for example in read_split(SAMPLE, "quora", "train")} == {0, 1}
    assert (SAMPLE / "ids-sst-train.csv").read_text().splitlines()[1].split("\t")[2].startswith(" ")
    assert (SAMPLE / "quora-test-student.csv").read_text().startswith("0\t\tid\t")  # doubled index


def test_the_sample_is_exactly_what_make_sample_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("make_sample", SAMPLE / "make_sample.py")
    make_sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_sample)
    counts = make_sample.write_sample(tmp_path)
    for name in counts:
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    assert {path.name for path in SAMPLE.glob("*.csv")} == set(counts)


def test_the_sample_folder_is_small_and_labelled_as_a_demo():
    files = [path for path in SAMPLE.iterdir() if path.is_file()]
    assert sum(path.stat().st_size for path in files) < 300_000
    assert "SYNTHETIC DEMO DATA" in (SAMPLE / "README.md").read_text()

"""Label hierarchies (tasks/data/hierarchy.py): levels, ancestors and errors on hand-made hierarchies, the
seeded split, the 20 Newsgroups post reader on a hand-made archive, and the four shared datasets' documented
sizes.

Everything here is exact (sets, counts, strings); the shared-data counts come from each dataset's
SOURCE.txt under ../shared/data and from the module docstring.
"""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

from tasks.data.hierarchy import (DATASETS, Hierarchy, LabelledDocument, newsgroups_posts, read_dataset,
                                  read_newsgroups_hierarchy, seeded_split)

# a, b on level 1; a1, a2 under a; a1x under a1 (level 3); "x" has two parents: a (level 1) and a1x
# (level 3), so it sits on level 2. Its deep parent sorts first, so the BFS order is what decides.
TREE = {"a": [], "b": [], "a1": ["a"], "a2": ["a"], "a1x": ["a1"], "b1": ["b"]}
TWO_PARENTS = {**TREE, "x": ["a1x", "a"]}


# ----- levels --------------------------------------------------------------------------------------


def test_levels_of_a_tree_are_depths_and_each_level_is_sorted():
    h = Hierarchy(TREE)
    assert h.level == {"a": 1, "b": 1, "a1": 2, "a2": 2, "b1": 2, "a1x": 3}
    assert h.num_levels == 3
    assert h.levels == [["a", "b"], ["a1", "a2", "b1"], ["a1x"]]


def test_a_label_with_parents_at_different_depths_sits_below_its_shallowest_parent():
    reordered = dict(reversed(list(TWO_PARENTS.items())))
    for parents in (TWO_PARENTS, reordered):  # insertion order does not matter
        h = Hierarchy(parents)
        assert h.level["x"] == 2  # shortest path a -> x, not a -> a1 -> a1x -> x (level 4)
        assert h.levels == [["a", "b"], ["a1", "a2", "b1", "x"], ["a1x"]]
        assert h.num_levels == 3


def test_levels_follow_the_shortest_path_through_a_chain_of_shortcuts():
    # d hangs below c (level 3) and below r directly, and e below d: e is on level 3, not 4 or 5.
    h = Hierarchy({"r": [], "m": ["r"], "c": ["m"], "d": ["c", "r"], "e": ["d"]})
    assert h.level == {"r": 1, "m": 2, "c": 3, "d": 2, "e": 3}


# ----- ancestors and augment -----------------------------------------------------------------------


def test_augment_adds_every_ancestor_over_several_levels_and_parents():
    h = Hierarchy(TWO_PARENTS)
    assert h.ancestors("a1x") == {"a1", "a"}
    assert h.ancestors("x") == {"a1x", "a1", "a"}  # both parents and all their ancestors
    assert h.augment(["a1x"]) == frozenset({"a1x", "a1", "a"})
    assert h.augment(["x", "b1"]) == frozenset({"x", "a1x", "a1", "a", "b1", "b"})
    assert h.augment(["a", "b"]) == frozenset({"a", "b"})  # top-level labels add nothing
    assert h.augment([]) == frozenset()
    assert isinstance(h.augment(["a1"]), frozenset)


def test_augment_rejects_unknown_labels_naming_them():
    h = Hierarchy(TREE)
    with pytest.raises(ValueError, match=r"\['nope', 'zzz'\] are not in the hierarchy"):
        h.augment(["a1", "zzz", "nope"])


def test_by_level_splits_labels_by_their_level():
    h = Hierarchy(TWO_PARENTS)
    assert h.by_level(["a1x", "x", "a", "a1", "b1"]) == [{"a"}, {"x", "a1", "b1"}, {"a1x"}]
    assert h.by_level([]) == [set(), set(), set()]


def test_from_paths_links_each_label_to_the_one_before_it():
    h = Hierarchy.from_paths([("rec", "rec.sport", "rec.sport.hockey"), ("rec", "rec.autos"),
                              ("rec", "rec.sport", "rec.sport.baseball"), ("sci",), ("sci", "sci.med")])
    assert h.parents == {"rec": frozenset(), "sci": frozenset(), "rec.sport": {"rec"}, "rec.autos": {"rec"},
                         "sci.med": {"sci"}, "rec.sport.hockey": {"rec.sport"},
                         "rec.sport.baseball": {"rec.sport"}}
    assert h.levels == [["rec", "sci"], ["rec.autos", "rec.sport", "sci.med"],
                        ["rec.sport.baseball", "rec.sport.hockey"]]


def test_a_parent_that_is_not_a_label_raises_naming_it():
    with pytest.raises(ValueError, match=r"parent label\(s\) \['ghost'\] are not labels of the hierarchy"):
        Hierarchy({"a": [], "b": ["a", "ghost"]})


def test_an_empty_hierarchy_is_refused_with_a_message():
    with pytest.raises(ValueError, match="a hierarchy needs at least one label"):
        Hierarchy({})


@pytest.mark.parametrize("parents", [
    {"r": [], "a": ["b"], "b": ["a"]},  # a cycle beside a proper root
    {"a": ["b"], "b": ["a"]},  # nothing but the cycle
    {"r": [], "a": ["a"]},  # a label that is its own only parent
], ids=["cycle-beside-root", "only-a-cycle", "self-loop"])
def test_a_cycle_without_a_top_level_ancestor_raises_naming_its_labels(parents):
    cycle = sorted(set(parents) - {"r"})
    with pytest.raises(ValueError, match=re.escape(f"{cycle!r} are on a cycle with no top-level ancestor")):
        Hierarchy(parents)


# ----- seeded_split --------------------------------------------------------------------------------


def documents(n: int) -> list[LabelledDocument]:
    return [LabelledDocument(f"doc-{i:03d}", f"text {i}", frozenset({"a"})) for i in range(n)]


def test_seeded_split_is_deterministic_and_independent_of_input_order():
    docs = documents(50)
    first = seeded_split(docs, (0.7, 0.1, 0.2), "demo")
    assert first == seeded_split(list(reversed(docs)), (0.7, 0.1, 0.2), "demo")  # sorted by id first
    assert first != seeded_split(docs, (0.7, 0.1, 0.2), "other")  # the name seeds the shuffle
    assert [d.id for d in first[0]] != sorted(d.id for d in first[0])  # and it does shuffle


@pytest.mark.parametrize("n, fractions, sizes", [
    (10, (0.7, 0.1, 0.2), [7, 1, 2]),
    (50, (0.7, 0.1, 0.2), [35, 5, 10]),
    (33, (0.9, 0.1), [30, 3]),  # round(29.7) = 30; the last part takes the rest
    (7, (0.5, 0.5), [4, 3]),  # round(3.5) = 4 (half to even)
])
def test_seeded_split_is_disjoint_covers_everything_and_respects_the_fractions(n, fractions, sizes):
    docs = documents(n)
    parts = seeded_split(docs, fractions, "demo")
    assert [len(p) for p in parts] == sizes
    ids = [d.id for part in parts for d in part]
    assert len(ids) == len(set(ids)) == n  # disjoint
    assert set(ids) == {d.id for d in docs}  # and covering


# ----- 20 Newsgroups reader on a hand-made archive -------------------------------------------------

POST = ("From: someone@example.com\nSubject: Re: hockey\nNewsgroups: rec.sport.hockey\nLines: 6\n\n"
        "In article <1@x>, fan@example.com writes:\n> quoted line\n  | also quoted\n"
        "My own text.\nAnother line, he wrote:\nLast line.\n")


def write_archive(path: Path, posts: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        directory = tarfile.TarInfo("20news-bydate-train/rec.sport.hockey")
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
        for name, text in posts.items():
            data = text.encode("latin-1")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_newsgroups_posts_drop_headers_quotes_and_attributions(tmp_path):
    archive = write_archive(tmp_path / "a.tar.gz", {
        "20news-bydate-train/rec.sport.hockey/9": POST,
        "20news-bydate-train/rec.autos/10": "From: x\n\nCaf\xe9 body",  # latin-1, as Usenet is
        "20news-bydate-test/sci.med/3": "From: y\n\nTest body",
        "20news-bydate-train/rec.autos/11": "From: only headers\nSubject: no body",
    })
    train = newsgroups_posts(archive, "train")
    assert train == [  # sorted by file name
        ("20news-bydate-train/rec.autos/10", "rec.autos", "Caf\xe9 body"),
        ("20news-bydate-train/rec.autos/11", "rec.autos", ""),
        ("20news-bydate-train/rec.sport.hockey/9", "rec.sport.hockey", "My own text.\nLast line."),
    ]
    assert newsgroups_posts(archive, "test") == [("20news-bydate-test/sci.med/3", "sci.med", "Test body")]


def test_newsgroups_hierarchy_on_a_hand_made_archive(tmp_path):
    write_archive(tmp_path / "20newsgroups" / "20news-bydate.tar.gz", {
        "20news-bydate-train/rec.sport.hockey/9": POST,
        "20news-bydate-train/rec.autos/10": "From: x\n\nCars",
        "20news-bydate-train/rec.autos/11": "From: x\n\n> only a quote",  # empty once cleaned: dropped
        "20news-bydate-test/sci.med/3": "From: y\n\nTest   body\n  here",
    })
    data = read_newsgroups_hierarchy(tmp_path)
    assert data.hierarchy.levels == [["rec", "sci"], ["rec.autos", "rec.sport", "sci.med"],
                                     ["rec.sport.hockey"]]
    assert data.splits["test"] == [LabelledDocument("20news-bydate-test/sci.med/3", "Test body here",
                                                    frozenset({"sci", "sci.med"}))]
    train = sorted(data.splits["train"] + data.splits["dev"], key=lambda d: d.id)
    assert [(d.id.rsplit("/", 1)[1], d.text, d.labels) for d in train] == [
        ("10", "Cars", frozenset({"rec", "rec.autos"})),
        ("9", "My own text. Last line.", frozenset({"rec", "rec.sport", "rec.sport.hockey"})),
    ]


def test_newsgroups_reader_errors_name_the_archive_and_the_split(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.tar.gz"):
        newsgroups_posts(tmp_path / "missing.tar.gz", "train")
    archive = write_archive(tmp_path / "a.tar.gz", {"20news-bydate-test/sci.med/3": "From: y\n\nbody"})
    with pytest.raises(ValueError, match="not 'dev'"):
        newsgroups_posts(archive, "dev")


def test_read_dataset_rejects_an_unknown_name_listing_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset 'rcv1'.*'hwv', '20newsgroups', 'enron', 'trec'"):
        read_dataset(tmp_path, "rcv1")
    assert DATASETS == ("hwv", "20newsgroups", "enron", "trec")


# ----- the shared datasets -------------------------------------------------------------------------


def all_documents(data) -> list[LabelledDocument]:
    docs = [d for part in data.splits.values() for d in part]
    assert len({d.id for d in docs}) == len(docs)  # splits are disjoint
    return docs


def closed_under_ancestors(data) -> bool:
    return all(data.hierarchy.augment(d.labels) == d.labels for d in all_documents(data))


@pytest.fixture(scope="module")
def newsgroups(data_dir):
    return read_dataset(data_dir, "20newsgroups")  # ~1.5 s: read once for the module


@pytest.mark.data
def test_shared_hwv_sizes_levels_and_ancestor_closure(data_dir):
    data = read_dataset(data_dir, "hwv")
    docs = all_documents(data)
    assert len(docs) == 3605  # val 1,602 + test 2,003 (SOURCE.txt)
    assert {name: len(part) for name, part in data.splits.items()} == {"train": 2524, "dev": 360, "test": 721}
    assert [len(level) for level in data.hierarchy.levels] == [11, 109, 381, 437, 244, 4]
    assert closed_under_ancestors(data)
    assert all(2 <= len(d.labels) <= 6 for d in docs)  # SOURCE.txt: one path of 2-6 labels per document


@pytest.mark.data
def test_shared_newsgroups_hierarchy_and_test_split(newsgroups):
    h = newsgroups.hierarchy
    leaves = {label for label in h.parents if not any(label in ps for ps in h.parents.values())}
    assert len(leaves) == 20
    docs = all_documents(newsgroups)
    assert {max(d.labels, key=len) for d in docs} == leaves  # each document's group is a leaf
    assert h.levels[0] == ["alt", "comp", "misc", "rec", "sci", "soc", "talk"]
    assert 7400 <= len(newsgroups.splits["test"]) <= 7532  # bydate-test has 7,532; empty posts are dropped
    assert closed_under_ancestors(newsgroups)


@pytest.mark.data
def test_shared_newsgroups_texts_have_their_headers_dropped(newsgroups):
    docs = all_documents(newsgroups)
    # Every bydate post starts with a "From:" header; with the headers kept, every text would. Some bodies
    # repeat a header block of their own (71 posts, e.g. 20news-bydate-train/sci.electronics/53951, some
    # indented or marked: "   Newsgroups: sci.med"); those lines go too, so no text names its group that way.
    assert not [d.id for d in docs if d.text.startswith("From:")]
    leaks = [d.id for d in docs if any(f"Newsgroups: {g}" in d.text for g in d.labels)]
    assert not leaks, leaks[:3]
    assert all(d.text and d.text == " ".join(d.text.split()) for d in docs)  # whitespace collapsed, not empty


@pytest.mark.data
def test_shared_enron_sizes_and_levels(data_dir):
    data = read_dataset(data_dir, "enron")
    docs = all_documents(data)
    assert len(docs) == 1702
    assert data.hierarchy.levels[0] == ["1", "2", "3", "4"]
    assert len(data.hierarchy.levels) == 2 and len(data.hierarchy.levels[1]) == 53
    assert all(label.split(".")[0] in d.labels for d in docs for label in d.labels)  # "3.6" brings "3"
    assert not any(d.text.startswith(("Message-ID:", "Date:", "From:")) for d in docs)


@pytest.mark.data
def test_shared_trec_sizes_and_levels(data_dir):
    data = read_dataset(data_dir, "trec")
    docs = all_documents(data)
    assert len(docs) == 5452
    assert [len(level) for level in data.hierarchy.levels] == [6, 50]
    assert data.hierarchy.levels[0] == ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    assert all(len(data.hierarchy.by_level(d.labels)[0]) == 1 == len(data.hierarchy.by_level(d.labels)[1])
               for d in docs)  # one coarse and one fine label each
    assert closed_under_ancestors(data)

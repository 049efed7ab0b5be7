"""Make the synthetic demo set: template sentences in the course's file format, a few hundred per task.

Nothing here comes from SST, IMDB, Quora or STS-B: every sentence is built from the word lists and
templates below, with a fixed seed, so the files are the same on every run and anyone can see how
they were made. Labels follow the templates (a "superb" film is positive; a paraphrase template
makes a duplicate question), so a model can learn *something*, but the numbers it reaches on this set
say nothing about the real tasks. The files mirror the course's quirks so the same readers parse
them: tab-separated, a header, an unnamed index column (doubled in the SST, CFIMDB and Quora test
files), SST's Penn Treebank escapes (-LRB-, ``, \\/), leading spaces, CSV-quoted double quotes.

Run from anywhere (standard library only):  python data/sample/make_sample.py

Read next: README.md beside this file, then tasks/data/course.py (the readers).
"""

from __future__ import annotations

import csv
import random
import re
from pathlib import Path

SEED = 224
SIZES = {  # task -> (train, dev, test) examples
    "sst": (240, 80, 80),
    "cfimdb": (150, 50, 50),
    "quora": (240, 80, 80),
    "sts": (240, 80, 80),
}
FILES = {
    "sst": ("ids-sst-train.csv", "ids-sst-dev.csv", "ids-sst-test-student.csv"),
    "cfimdb": ("ids-cfimdb-train.csv", "ids-cfimdb-dev.csv", "ids-cfimdb-test-student.csv"),
    "quora": ("quora-train.csv", "quora-dev.csv", "quora-test-student.csv"),
    "sts": ("sts-train.csv", "sts-dev.csv", "sts-test-student.csv"),
}
COLUMNS = {  # text columns, label column
    "sst": (["sentence"], "sentiment"),
    "cfimdb": (["sentence"], "sentiment"),
    "quora": (["sentence1", "sentence2"], "is_duplicate"),
    "sts": (["sentence1", "sentence2"], "similarity"),
}
DOUBLED_TEST_INDEX = {"sst", "cfimdb", "quora"}  # the course's STS test file has a single index

# ---- movie words (SST and CFIMDB); titles and names are made up ----------------------------------
ADJECTIVES = [  # SST label 0 (very negative) .. 4 (very positive)
    ["dreadful", "unwatchable", "insufferable", "lifeless", "miserable", "hopeless"],
    ["flat", "tedious", "forgettable", "clumsy", "overlong", "bland"],
    ["modest", "uneven", "familiar", "ordinary", "predictable", "conventional"],
    ["charming", "engaging", "funny", "smart", "warm", "likable"],
    ["brilliant", "dazzling", "unforgettable", "superb", "wonderful", "masterful"],
]
NOUNS = ["script", "plot", "cast", "direction", "soundtrack", "ending", "pacing", "dialogue"]
GENRES = ["comedy", "thriller", "drama", "documentary", "romance", "horror movie", "musical", "western"]
TOPICS = ["two sisters in Ohio", "a small-town dentist", "a stolen painting", "the end of a marriage",
          "a chess prodigy", "a haunted lighthouse", "a failing circus", "three old friends"]
TITLES = ["The Glass Orchard", "Night Ferry", "Paper Kites", "Salt and Thunder", "The Quiet Engine",
          "Lantern Street", "Blue Harbor", "The Last Tram"]
NAMES = ["Dana Kowal", "Ravi Mendes", "Ines Halloran", "Tomas Brandt", "Mei Okafor", "Luca Varga"]
ASIDES = ["mostly", "at least for an hour", "despite its length", "and it knows it"]
SST_TEMPLATES = [
    "The {noun} is {adj} .",
    "A {adj} {genre} about {topic} .",
    "{name} 's {noun} is {adj} , and so is the {noun2} .",
    "`` {title} '' is {adj} -LRB- {aside} -RRB- .",
    "It 's a {adj} {genre} , and the writer\\/director clearly knows it .",
    "{title} : {adj} , {adj2} and about {topic} .",
]
REVIEW_OPENERS = ["I saw {title} on a rainy Sunday .", "The story follows {topic} .",
                  "{title} runs about two hours .", "My sister picked {title} for movie night ."]
REVIEW_LINES = [  # index 0: negative review lines, 1: positive
    ["The {noun} is {adj} .", "{name} looks bored in every scene .", "I checked my watch twice .",
     'A friend called it " {adj} " and I agree .', "Even the {noun} could not save it ."],
    ["The {noun} is {adj} .", "{name} gives a {adj} performance .", "I would watch it again tomorrow .",
     'A friend called it " {adj} " and I agree .', "Even the {noun} is a small delight ."],
]
VERDICTS = [["Not recommended .", "Skip this one .", "Two stars , both for the poster ."],
            ["Highly recommended .", "Go and see it .", "Nine out of ten ."]]

# ---- questions (Quora): each intent has paraphrase templates of one slot -------------------------
INTENTS = [
    (["How can I learn {x}?", "What is the best way to learn {x}?", "How do I get started with {x}?"],
     ["Python", "Spanish", "chess", "the guitar", "calculus", "photography", "knitting", "sailing"]),
    (["How do I improve my {x}?", "How can I get better at {x}?", "What should I do to improve my {x}?"],
     ["handwriting", "public speaking", "memory", "cooking", "posture", "typing speed", "sleep"]),
    (['What does "{x}" mean?', 'What is the meaning of the word "{x}"?', 'What is meant by "{x}"?'],
     ["serendipity", "ephemeral", "quorum", "gerrymander", "sonder", "petrichor", "ennui"]),
    (["Why is {x} so expensive?", "What makes {x} so expensive?", "Why does {x} cost so much?"],
     ["saffron", "vanilla", "insulin", "housing in cities", "college", "printer ink", "coffee"]),
    (["Is it safe to travel to {x} alone?", "Is {x} safe for solo travellers?",
      "Can I travel alone to {x} safely?"],
     ["Iceland", "Peru", "Vietnam", "Morocco", "Japan", "Portugal", "Kenya"]),
]

# ---- scenes (STS): subject, action, place, each with two wordings ---------------------------------
SUBJECTS = [("A man", "A guy"), ("A woman", "A lady"), ("A child", "A kid"), ("A student", "A pupil"),
            ("A chef", "A cook"), ("An old man", "An elderly man")]
ACTIONS = [("is playing a guitar", "is strumming a guitar"), ("is slicing an onion", "is cutting an onion"),
           ("is riding a bicycle", "is riding a bike"), ("is reading a book", "is reading a novel"),
           ("is running", "is jogging"), ("is eating an apple", "is biting into an apple")]
PLACES = [("on a stage", "on the stage"), ("in a kitchen", "in the kitchen"), ("in the park", "at the park"),
          ("on a beach", "on the beach"), ("in the rain", "under the rain"), ("near a river", "by a river")]


def fix_articles(text: str) -> str:
    """Turn "a" into "an" before a vowel, so templates can say "a {adj}" for any adjective."""
    return re.sub(r"\b([Aa]) (?=[aeiou])", r"\1n ", text)


def sst_example(rng: random.Random) -> tuple[list[str], str]:
    label = rng.randrange(5)
    adj, adj2 = rng.sample(ADJECTIVES[label], 2)
    noun, noun2 = rng.sample(NOUNS, 2)
    sentence = rng.choice(SST_TEMPLATES).format(
        adj=adj, adj2=adj2, noun=noun, noun2=noun2, genre=rng.choice(GENRES), topic=rng.choice(TOPICS),
        name=rng.choice(NAMES), title=rng.choice(TITLES), aside=rng.choice(ASIDES))
    sentence = fix_articles(sentence[0].upper() + sentence[1:])
    return [" " + sentence], str(label)  # SST sentences start with a space


def cfimdb_example(rng: random.Random) -> tuple[list[str], str]:
    label = rng.randrange(2)
    title = rng.choice(TITLES)
    adjectives = ADJECTIVES[0] + ADJECTIVES[1] if label == 0 else ADJECTIVES[3] + ADJECTIVES[4]
    lines = [rng.choice(REVIEW_OPENERS)] + rng.sample(REVIEW_LINES[label], 3) + [rng.choice(VERDICTS[label])]
    review = " ".join(line.format(title=title, topic=rng.choice(TOPICS), noun=rng.choice(NOUNS),
                                  name=rng.choice(NAMES), adj=rng.choice(adjectives)) for line in lines)
    return [" " + fix_articles(review)], str(label)


def quora_example(rng: random.Random) -> tuple[list[str], str]:
    templates, slots = rng.choice(INTENTS)
    first, second = rng.sample(templates, 2)
    x = rng.choice(slots)
    duplicate = rng.random() < 0.4  # about Quora's share of duplicates
    if duplicate:
        y = x
    elif rng.random() < 0.5:  # a hard negative: same question, another subject
        y = rng.choice([s for s in slots if s != x])
    else:
        other_templates, other_slots = rng.choice([i for i in INTENTS if i[0] is not templates])
        second, y = rng.choice(other_templates), rng.choice(other_slots)
    return [first.format(x=x), second.format(x=y)], "1.0" if duplicate else "0.0"


def sts_example(rng: random.Random) -> tuple[list[str], str]:
    parts = [rng.randrange(len(SUBJECTS)), rng.randrange(len(ACTIONS)), rng.randrange(len(PLACES))]
    changed = [rng.random() < 0.4 for _ in parts]
    other = [rng.choice([j for j in range(len(pool)) if j != i]) if change else i
             for i, change, pool in zip(parts, changed, (SUBJECTS, ACTIONS, PLACES))]
    reword = [rng.randrange(2) for _ in parts]  # which wording the second sentence uses

    def sentence(indices: list[int], wording: list[int]) -> str:
        return " ".join(pool[i][w] for i, w, pool in zip(indices, wording, (SUBJECTS, ACTIONS, PLACES))) + "."

    # The action carries most of a scene's meaning, the subject some, the place least.
    score = 5.0 - 1.5 * changed[0] - 2.5 * changed[1] - 1.0 * changed[2] - 0.2 * sum(reword)
    return [sentence(parts, [0, 0, 0]), sentence(other, reword)], f"{max(score, 0.0):.1f}"


MAKERS = {"sst": sst_example, "cfimdb": cfimdb_example, "quora": quora_example, "sts": sts_example}


def write_split(path: Path, task: str, rows: list[tuple[str, list[str], str]], labelled: bool) -> None:
    """Write rows (id, texts, label) with the course's header and index columns."""
    texts, label_column = COLUMNS[task]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
        if labelled:
            writer.writerow(["", "id", *texts, label_column])
            writer.writerows([str(k), id_, *fields, label] for k, (id_, fields, label) in enumerate(rows))
        elif task in DOUBLED_TEST_INDEX:  # pandas saved a frame that already had an index column
            writer.writerow(["0", "", "id", *texts])
            writer.writerows([str(k + 1), f"{k}.0", id_, *fields] for k, (id_, fields, _) in enumerate(rows))
        else:
            writer.writerow(["", "id", *texts])
            writer.writerows([str(k), id_, *fields] for k, (id_, fields, _) in enumerate(rows))


def write_sample(out_dir: Path) -> dict[str, int]:
    """Write every task's three files into `out_dir`; return the number of examples per file name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for task, sizes in SIZES.items():
        rng = random.Random(f"{SEED}-{task}")  # string seeds are stable across runs and platforms
        seen_ids: set[str] = set()
        for name, size, labelled in zip(FILES[task], sizes, (True, True, False)):
            rows = []
            while len(rows) < size:
                id_ = f"{rng.getrandbits(100):025x}"  # 25 hex digits, like the course's ids
                if id_ not in seen_ids:
                    seen_ids.add(id_)
                    rows.append((id_, *MAKERS[task](rng)))
            write_split(out_dir / name, task, rows, labelled)
            counts[name] = size
    return counts


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    for name, count in write_sample(here).items():
        print(f"{here / name}: {count} examples")

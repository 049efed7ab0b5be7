"""Pre-training text: documents of sentences, and BERT's next-sentence examples built from them.

A corpus is a list of documents; a document is a list of sentences. Plain-text files hold one sentence or
paragraph per line, a blank line between documents (BERT's own input format; `wikitext`: a document per
" = Title = " article). From the task data, an SST sentence is a one-sentence document, a Quora or STS row
a two-sentence one, CFIMDB reviews and 20 Newsgroups posts are split into sentences; only the splits asked
for are read (test text never unless named).

Next-sentence examples follow Google's `create_pretraining_data.py` (BERT paper §3.1, Task #2, §A.2):
sentences are gathered into a chunk up to the target length (with probability `short_seq_prob` a shorter
one, so short fine-tuning inputs are no surprise), cut at random into A and B; half the time B comes from
another document; the pair is truncated from the longer side to fit `[CLS] A [SEP] B [SEP]`. Where we
differ: a chunk of one sentence has no next sentence, and Google's code then always draws a random B
(labels 2/3 "random" on short documents); we make it a single-segment example that trains masked-LM only,
so the NSP labels stay a fair coin.

Read next: ../minbert/masking.py (what the model must predict), run.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

from tasks.data.examples import decode_data_file
from tasks.data.hierarchy import newsgroups_posts

Document = list[str]  # sentences

IS_NEXT, NOT_NEXT = 0, 1  # BERT's NSP labels (TF order: 0 = B follows A)
NO_NSP_LABEL = -100  # single-segment examples: the NSP loss ignores them
NSP_MIN_DOCUMENTS = 2  # a random B comes from another document than A's, in each set examples are made from

# ----- sentences ------------------------------------------------------------------------------------

# Abbreviations whose period does not end a sentence (lower-case, without the final period).
ABBREVIATIONS = frozenset("""mr mrs ms dr prof sr jr st vs etc e.g i.e cf al fig no vol inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m approx dept est""".split())

# A sentence ends at . ! or ? (possibly repeated, possibly followed by closing quotes or brackets),
# then whitespace, then something that can start a sentence (a capital, a digit, an opening quote or
# bracket). Lower-case after the period ("e.g. this") never splits.
_BOUNDARY = re.compile(r"""([.!?]+["')\]]*)\s+(?=["'(\[`]*[A-Z0-9])""")


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with the punctuation rule above (no model, no download). It errs
    ("he said. and then" stays whole; an unknown abbreviation before a capital splits), which is good enough
    for pre-training data: BERT's own pipeline assumed one sentence per line and lived with noisy input.
    """
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        candidate = text[start:match.end(1)]
        last_word = candidate.rsplit(None, 1)[-1].rstrip(".!?\"')]").lower() if candidate.strip() else ""
        if match.group(1).startswith(".") and (last_word in ABBREVIATIONS
                                               or re.fullmatch(r"[a-z]", last_word)):
            continue
        sentences.append(candidate.strip())
        start = match.end()
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return [s for s in sentences if s]


# ----- sources --------------------------------------------------------------------------------------

TEXT_FORMATS = ("plain", "wikitext")
_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = $")


def read_text_documents(path: str | Path, text_format: str = "plain") -> list[Document]:
    """Documents of a text file (see the module docstring for the two formats)."""
    path = Path(path)
    if text_format not in TEXT_FORMATS:
        raise ValueError(f"text format must be one of {TEXT_FORMATS}, got {text_format!r}")
    text = decode_data_file(path, "utf-8")
    documents: list[Document] = [[]]
    for line in text.splitlines():
        if text_format == "wikitext":
            if _WIKITEXT_TITLE.match(line):
                documents.append([])
                continue
            if not line.strip() or line.strip().startswith("="):  # blank lines and section headings
                continue
        elif not line.strip():
            documents.append([])
            continue
        documents[-1].extend(split_sentences(line))
    return [d for d in documents if d]


def newsgroups_documents(archive: str | Path, split: str = "train") -> list[Document]:
    """20 Newsgroups posts of one split as documents: sentences of each paragraph, without headers and quotes
    (tasks.data.hierarchy.newsgroups_posts reads them)."""
    documents = []
    for _, _, body in newsgroups_posts(archive, split):
        sentences = []
        for paragraph in re.split(r"\n\s*\n", body):
            sentences.extend(split_sentences(" ".join(paragraph.split())))
        if sentences:
            documents.append(sentences)
    return documents


def task_documents(task: str, examples: Sequence) -> list[Document]:
    """Documents of a course task's examples (see the module docstring)."""
    if task in ("quora", "sts"):
        return [[e.sentence1, e.sentence2] for e in examples]
    if task == "cfimdb":
        return [split_sentences(e.sentence) for e in examples]
    return [[e.sentence] for e in examples]


# ----- next-sentence examples -----------------------------------------------------------------------


class PretrainingExample(NamedTuple):
    input_ids: list[int]  # [CLS] A [SEP] B [SEP] (or [CLS] A [SEP])
    token_type_ids: list[int]  # 0 for [CLS] A [SEP], 1 for B [SEP]
    next_sentence_label: int  # IS_NEXT, NOT_NEXT, or NO_NSP_LABEL for a single segment


@dataclass
class ExampleStats:
    """What building the examples ran into, for the run's report."""

    examples: int = 0
    is_next: int = 0
    not_next: int = 0
    single_segment: int = 0
    truncated_pairs: int = 0
    skipped_empty_documents: int = 0

    def report(self) -> str:
        with_nsp = self.is_next + self.not_next
        share = f"{self.not_next / with_nsp:.1%} random B" if with_nsp else "no NSP pairs"
        return (f"{self.examples} examples: {with_nsp} sentence pairs ({share}), {self.single_segment} "
                f"single-segment (masked-LM only); {self.truncated_pairs} truncated to the window; "
                f"{self.skipped_empty_documents} empty document(s) skipped")


def truncate_pair(tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random) -> bool:
    """Cut the longer segment, one piece at a time at a random end, until both fit; True if cut."""
    cut = False
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        # Google: "We want to sometimes truncate from the front and sometimes from the back to add more
        # randomness and avoid biases."
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
        cut = True
    return cut


def create_examples(documents: Sequence[Sequence[list[int]]], max_seq_length: int, rng: random.Random,
                    cls_id: int, sep_id: int, short_seq_prob: float = 0.1, nsp: bool = True) -> tuple[
                        list[PretrainingExample], ExampleStats]:
    """Next-sentence examples from documents of tokenised sentences (lists of piece ids).

    Every document is visited once, in order; the caller shuffles. nsp=False makes every example a
    single segment ([CLS] A [SEP], as long as the window allows).
    """
    stats = ExampleStats()
    usable = [i for i, d in enumerate(documents) if any(d)]
    stats.skipped_empty_documents = len(documents) - len(usable)
    if nsp and len(usable) < NSP_MIN_DOCUMENTS:
        raise ValueError("next-sentence prediction needs at least two non-empty documents (a random B "
                         f"comes from another document); this corpus has {len(usable)}")
    examples: list[PretrainingExample] = []
    for index in usable:
        document = [s for s in documents[index] if s]
        for example in _document_examples(document, index, documents, usable, max_seq_length, rng,
                                          short_seq_prob, nsp, stats):
            examples.append(_wrap(example, cls_id, sep_id))
    stats.examples = len(examples)
    return examples, stats


def _document_examples(document, index, documents, usable, max_seq_length, rng, short_seq_prob, nsp, stats):
    """Google's create_instances_from_document, with our single-segment rule; yields (A, B or None, label)."""
    max_tokens = max_seq_length - (3 if nsp and len(document) > 1 else 2)  # room for [CLS], [SEP] (, [SEP])
    target_length = max_tokens
    if rng.random() < short_seq_prob:
        target_length = rng.randint(2, max_tokens)
    if not nsp or len(document) == 1:
        # Single segments: pack whole sentences up to the target length.
        chunk: list[int] = []
        for sentence in document:
            if chunk and len(chunk) + len(sentence) > target_length:
                yield _single(chunk, max_tokens, stats)
                chunk = []
            chunk = chunk + sentence
        if chunk:
            yield _single(chunk, max_tokens, stats)
        return

    chunk_sentences: list[list[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk_sentences.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            if len(chunk_sentences) == 1:
                # Google forces a random B here, which skews the labels towards "random" (to 2/3 on
                # two-sentence documents, where every put-back sentence ends up alone); we keep the
                # coin fair and let a lone sentence train masked-LM only.
                yield _single(chunk_sentences[0], max_tokens, stats)
                chunk_sentences, chunk_length = [], 0
                i += 1
                continue
            # A gets the first a_end sentences of the chunk (at least one).
            a_end = rng.randint(1, len(chunk_sentences) - 1)
            tokens_a = [t for s in chunk_sentences[:a_end] for t in s]
            if rng.random() < 0.5:
                label = NOT_NEXT
                tokens_b = _random_segment(documents, usable, index, target_length - len(tokens_a), rng)
                i -= len(chunk_sentences) - a_end  # put the unused sentences back
            else:
                label = IS_NEXT
                tokens_b = [t for s in chunk_sentences[a_end:] for t in s]
            stats.truncated_pairs += truncate_pair(tokens_a, tokens_b, max_tokens, rng)
            stats.is_next += label == IS_NEXT
            stats.not_next += label == NOT_NEXT
            yield tokens_a, tokens_b, label
            chunk_sentences, chunk_length = [], 0
        i += 1


def _single(tokens: list[int], max_tokens: int, stats: ExampleStats) -> tuple[list[int], None, int]:
    """A single-segment example (A, no B, no NSP label), cut to the window."""
    if len(tokens) > max_tokens:
        stats.truncated_pairs += 1
        tokens = tokens[:max_tokens]
    stats.single_segment += 1
    return tokens, None, NO_NSP_LABEL


def _random_segment(documents, usable, index, target_length, rng) -> list[int]:
    """Sentences from a random start in a random other document, up to `target_length` pieces."""
    other = index
    while other == index:  # at least two usable documents, checked by the caller
        other = usable[rng.randrange(len(usable))]
    sentences = [s for s in documents[other] if s]
    tokens: list[int] = []
    for sentence in sentences[rng.randrange(len(sentences)):]:
        tokens.extend(sentence)
        if len(tokens) >= target_length:
            break
    return tokens


def _wrap(example, cls_id: int, sep_id: int) -> PretrainingExample:
    tokens_a, tokens_b, label = example
    input_ids = [cls_id] + tokens_a + [sep_id]
    segments = [0] * len(input_ids)
    if tokens_b is not None:
        input_ids += tokens_b + [sep_id]
        segments += [1] * (len(tokens_b) + 1)
    return PretrainingExample(input_ids, segments, label)


def tokenize_documents(documents: Sequence[Document], tokenizer) -> list[list[list[int]]]:
    """Every sentence as piece ids (no special tokens), one batch call to the fast tokenizer."""
    flat = [s for d in documents for s in d]
    ids = tokenizer.backend.encode_batch_fast(flat, add_special_tokens=False) if flat else []
    out, k = [], 0
    for document in documents:
        out.append([ids[k + j].ids for j in range(len(document))])
        k += len(document)
    return out


def split_heldout(documents: Sequence, fraction: float, seed: int, at_least: int = 1) -> tuple[list, list]:
    """(training documents, held-out documents): a deterministic `fraction` of whole documents held out, and
    at least `at_least` of them (NSP_MIN_DOCUMENTS when the held-out examples have next-sentence pairs)."""
    order = list(range(len(documents)))
    random.Random(f"heldout-{seed}").shuffle(order)
    n_heldout = max(at_least, round(fraction * len(documents))) if fraction > 0 else 0
    heldout = set(order[:n_heldout])
    return ([d for i, d in enumerate(documents) if i not in heldout],
            [d for i, d in enumerate(documents) if i in heldout])

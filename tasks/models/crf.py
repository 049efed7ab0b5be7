"""A linear-chain conditional random field (CRF) over tag sequences, for BIO tagging on top of BERT.

A softmax tagger picks each word's tag alone, so nothing stops it from predicting "O I-person", a tag
sequence that IOB2 never contains. A linear-chain CRF (Lafferty, McCallum & Pereira 2001) scores the
whole sequence instead; with the start, end and transition scores of Lample et al. (2016, §2.2), the score
of tags y_1..y_n given the emissions E (BERT's per-word logits) is

    score(y) = start[y_1] + sum_{w=1..n} E[w, y_w] + sum_{w=2..n} T[y_{w-1}, y_w] + end[y_n]
    p(y | x) = exp(score(y)) / Z,    Z = sum over all K^n tag sequences y' of exp(score(y'))

and training maximises log p(gold | x) = score(gold) - log Z. Two dynamic programmes, each O(n K^2),
replace the enumeration (Rabiner 1989, §III.A-B): the forward algorithm,
alpha_w[j] = E[w, j] + logsumexp_i (alpha_{w-1}[i] + T[i, j]), and Viterbi, the same with max and
back-pointers. Both run in log space, vectorised over the batch; at a padded position the recursion
carries its state through unchanged, so a padded sequence gets exactly the numbers it gets alone.

Design choices a user must know:
- Parameter names and the convention T[i, j] = score of tag i followed by tag j are pytorch-crf's, so a
  state_dict loads into either.
- The parameters start at zero: the CRF then equals a per-word softmax, so adding it to a trained tagger
  changes nothing at step 0 (no symmetry problem: T[i, j]'s gradient differs for every pair).
- Transitions IOB2 forbids get a fixed additive -10000 (`FORBIDDEN`), a buffer rebuilt from `tags`, not
  saved. Finite on purpose: with -inf a gold sequence that breaks IOB2 gives an infinite loss and NaN
  gradients; e^-10000 is still exactly 0 in float32. Run the CRF in float32 or float64: float16 stops at
  65504, a few forbidden steps.
- `forward` returns the batch mean of -log p(gold | x) (pytorch-crf returns the summed log-likelihood).

Shape legend: B batch, W words (tag positions), K tags.

Read next: ../tag.py, which puts the CRF on BERT's word scores (tests/test_crf.py checks the CRF against
brute-force enumeration of all K^W paths).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

FORBIDDEN = -10000.0  # additive score of a transition IOB2 forbids; finite so gradients stay finite


def iob2_allowed(tags: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Which starts (K,) and transitions (K, K), [i, j] = i followed by j, IOB2 allows. Bool tensors.

    I-x may only follow B-x or I-x; every other tag may start a sequence or follow any tag.
    """
    for tag in tags:
        if tag != "O" and not (tag[:2] in ("B-", "I-") and len(tag) > 2):
            raise ValueError(f"tag {tag!r} is not IOB2: expected 'O', 'B-<type>' or 'I-<type>'")
    types = [tag[2:] if tag != "O" else None for tag in tags]
    inside = [tag.startswith("I-") for tag in tags]
    start = torch.tensor([not i for i in inside])
    allowed = torch.tensor([[not inside[j] or types[i] == types[j] for j in range(len(tags))]
                            for i in range(len(tags))])  # types[i] is None for O, never equal to a type
    return start, allowed


class CRF(nn.Module):
    """Linear-chain CRF over K tags: log-likelihood by the forward algorithm, decoding by Viterbi."""

    def __init__(self, num_tags: int, tags: Sequence[str] | None = None) -> None:
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be at least 1, got {num_tags}")
        if tags is not None and len(tags) != num_tags:
            raise ValueError(f"num_tags is {num_tags} but {len(tags)} tag names were given: {list(tags)}")
        self.num_tags = num_tags
        self.tags = tuple(tags) if tags is not None else None
        # zeros: the CRF starts as a per-word softmax (module docstring)
        self.start_transitions = nn.Parameter(torch.zeros(num_tags))  # (K,)
        self.end_transitions = nn.Parameter(torch.zeros(num_tags))  # (K,)
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # (K, K): [i, j] = i then j
        start_constraint = torch.zeros(num_tags)
        transition_constraint = torch.zeros(num_tags, num_tags)
        if tags is not None:
            start_allowed, allowed = iob2_allowed(tags)
            start_constraint[~start_allowed] = FORBIDDEN
            transition_constraint[~allowed] = FORBIDDEN
        # not persistent: the constraint follows from `tags`, and the state_dict stays pytorch-crf's
        self.register_buffer("start_constraint", start_constraint, persistent=False)  # (K,)
        self.register_buffer("transition_constraint", transition_constraint, persistent=False)  # (K, K)

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, iob2_constraints={self.tags is not None}"

    def _scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """start (K,), transitions (K, K), end (K,), with the IOB2 constraint added."""
        return (self.start_transitions + self.start_constraint,
                self.transitions + self.transition_constraint, self.end_transitions)

    def _check(self, emissions: torch.Tensor, mask: torch.Tensor,
               tags: torch.Tensor | None = None) -> torch.Tensor:
        """Validates the inputs; returns the mask as bool (B, W)."""
        if emissions.dim() != 3 or emissions.shape[2] != self.num_tags or emissions.shape[1] < 1:
            raise ValueError(f"emissions must be (B, W, K={self.num_tags}) with W >= 1, "
                             f"got {tuple(emissions.shape)}")
        if mask.shape != emissions.shape[:2]:
            raise ValueError(f"mask must be (B, W) = {tuple(emissions.shape[:2])}, got {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            if ((mask != 0) & (mask != 1)).any():
                raise ValueError("mask must hold only 0 (padding) and 1 (a word)")
            mask = mask.bool()
        if not mask[:, 0].all():
            rows = (~mask[:, 0]).nonzero().flatten().tolist()
            raise ValueError(f"mask: the first position must be on in every sequence; rows {rows} start off")
        holes = mask[:, 1:] & ~mask[:, :-1]  # (B, W-1): a word after padding
        if holes.any():
            rows = holes.any(dim=1).nonzero().flatten().tolist()
            raise ValueError(f"mask must be a prefix of ones per row (padding only at the end); rows {rows} "
                             "have a 1 after a 0")
        if tags is not None:
            if tags.shape != mask.shape:
                raise ValueError(f"tags must be (B, W) = {tuple(mask.shape)}, got {tuple(tags.shape)}")
            if ((tags < 0) | (tags >= self.num_tags))[mask].any():
                raise ValueError(f"tags at unmasked positions must lie in [0, {self.num_tags})")
        return mask

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z per sequence by the forward algorithm. (B, W, K), (B, W) -> (B,)."""
        mask = self._check(emissions, mask)
        start, transitions, end = self._scores()
        alpha = start + emissions[:, 0]  # (B, K): log-sum of the scores of all paths ending in tag j
        for w in range(1, emissions.shape[1]):
            # (B, K, 1) + (K, K) -> (B, K, K) over (previous i, next j); sum out i
            step = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + emissions[:, w]  # (B, K)
            # where, not multiply: a padded row keeps its alpha, and garbage emissions never leak in
            alpha = torch.where(mask[:, w].unsqueeze(1), step, alpha)
        return torch.logsumexp(alpha + end, dim=1)

    def score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """score(y) of the given tag sequences. (B, W, K), (B, W), (B, W) -> (B,)."""
        mask = self._check(emissions, mask, tags)
        start, transitions, end = self._scores()
        tags = tags.masked_fill(~mask, 0)  # padded tags may be anything (-100 too): make them valid indices
        zero = emissions.new_zeros(())
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, W)
        moved = transitions[tags[:, :-1], tags[:, 1:]]  # (B, W-1): T[y_{w-1}, y_w]
        last = tags.gather(1, mask.sum(dim=1, keepdim=True) - 1).squeeze(1)  # (B,): y_n
        return (start[tags[:, 0]] + torch.where(mask, emitted, zero).sum(dim=1)
                + torch.where(mask[:, 1:], moved, zero).sum(dim=1) + end[last])

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | x) = score - log Z. (B, W, K), (B, W), (B, W) -> (B,)."""
        return self.score(emissions, tags, mask) - self.log_partition(emissions, mask)

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The loss: mean over the batch of -log p(tags | x). Returns a scalar."""
        return -self.log_likelihood(emissions, tags, mask).mean()

    @torch.no_grad()
    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """The most likely tag sequence of each row by Viterbi: B lists, row b of length mask[b].sum()."""
        mask = self._check(emissions, mask)
        start, transitions, end = self._scores()
        keep = torch.arange(self.num_tags, device=emissions.device).expand(emissions.shape[0], -1)  # (B, K)
        best = start + emissions[:, 0]  # (B, K): score of the best path ending in tag j
        pointers = []  # per position w >= 1, (B, K): the best previous tag for tag j
        for w in range(1, emissions.shape[1]):
            top, previous = (best.unsqueeze(2) + transitions).max(dim=1)  # (B, K, K) -> (B, K) over j
            on = mask[:, w].unsqueeze(1)  # (B, 1)
            best = torch.where(on, top + emissions[:, w], best)
            # a padded position points each tag to itself, so backtracking walks through the padding
            pointers.append(torch.where(on, previous, keep))
        tag = (best + end).argmax(dim=1)  # (B,): the last real tag, carried to position W-1
        path = [tag]
        for previous in reversed(pointers):
            tag = previous.gather(1, tag.unsqueeze(1)).squeeze(1)
            path.append(tag)
        paths = torch.stack(path[::-1], dim=1).tolist()  # (B, W)
        return [row[:length] for row, length in zip(paths, mask.sum(dim=1).tolist())]

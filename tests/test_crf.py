"""The linear-chain CRF (tasks/models/crf.py) against brute-force enumeration of every tag sequence.

With K tags and n words there are K^n sequences; for K <= 5 and n <= 4 the tests list them all, score
each with a plain Python loop over the definition (start + emissions + transitions + end), and compare:
log Z with the logsumexp of all path scores, Viterbi with the argmax, probabilities with their sum 1.
Everything runs in float64, where the forward algorithm and the enumeration agree to 1e-10 (absolute,
on values of order 10); the gradcheck uses its float64 defaults (eps 1e-6, atol 1e-5, rtol 1e-3).
Parity with pytorch-crf (`torchcrf`, a reference we did not write) runs only where it is installed.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch.func import functional_call

from tasks.models.crf import CRF, FORBIDDEN, iob2_allowed

TOL = dict(atol=1e-10, rtol=0.0)
IOB2_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
O, B_PER, I_PER, B_LOC, I_LOC = range(5)


def random_crf(num_tags: int, tags=None, seed: int = 0) -> CRF:
    """A float64 CRF with random (non-zero) transition scores, so that every term of the score matters."""
    torch.manual_seed(seed)
    crf = CRF(num_tags, tags).double()
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.normal_()
    return crf


def prefix_mask(lengths: list[int], width: int) -> torch.Tensor:
    return torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # (B, W) bool


def path_score(crf: CRF, emissions: torch.Tensor, path) -> float:
    """The definition, one term at a time, with the raw parameters (no IOB2 constraint). emissions (n, K)."""
    start, end = crf.start_transitions.tolist(), crf.end_transitions.tolist()
    transitions, emitted = crf.transitions.tolist(), emissions.tolist()
    total = start[path[0]] + emitted[0][path[0]] + end[path[-1]]
    for w in range(1, len(path)):
        total += transitions[path[w - 1]][path[w]] + emitted[w][path[w]]
    return total


def all_paths(num_tags: int, length: int):
    return list(itertools.product(range(num_tags), repeat=length))


def log_sum_of_paths(crf: CRF, emissions: torch.Tensor, paths) -> torch.Tensor:
    """logsumexp of the path scores, i.e. log Z when `paths` is every sequence. emissions (n, K)."""
    return torch.tensor([path_score(crf, emissions, p) for p in paths], dtype=torch.float64).logsumexp(0)


def is_iob2(path, names=IOB2_TAGS) -> bool:
    """An I-x only right after B-x or I-x, written independently of tasks/models/crf.py's table."""
    previous = "O"
    for tag in (names[t] for t in path):
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            return False
        previous = tag
    return True


def padded_tags(path, width: int, fill: int = 0) -> torch.Tensor:
    return torch.tensor([list(path) + [fill] * (width - len(path))])  # (1, W)


# ----- the forward algorithm and the score against enumeration ------------------------------------------


def test_log_partition_is_logsumexp_over_all_paths():
    crf, lengths, width = random_crf(3), [4, 2, 1, 3], 4
    emissions = torch.randn(len(lengths), width, 3, dtype=torch.float64)
    log_z = crf.log_partition(emissions, prefix_mask(lengths, width))
    expected = [log_sum_of_paths(crf, emissions[b, :n], all_paths(3, n)) for b, n in enumerate(lengths)]
    torch.testing.assert_close(log_z, torch.stack(expected), **TOL)


def test_score_is_the_path_score_summed_by_hand():
    crf, lengths, width = random_crf(3, seed=1), [4, 2, 1], 4
    emissions = torch.randn(3, width, 3, dtype=torch.float64)
    tags = torch.randint(0, 3, (3, width))
    score = crf.score(emissions, tags, prefix_mask(lengths, width))
    expected = [path_score(crf, emissions[b, :n], tags[b, :n].tolist()) for b, n in enumerate(lengths)]
    torch.testing.assert_close(score, torch.tensor(expected, dtype=torch.float64), **TOL)


def test_log_likelihood_matches_brute_force_enumeration():
    crf, lengths, width = random_crf(3, seed=2), [3, 4, 1], 4
    emissions = torch.randn(3, width, 3, dtype=torch.float64)
    tags = torch.randint(0, 3, (3, width))
    log_likelihood = crf.log_likelihood(emissions, tags, prefix_mask(lengths, width))
    for b, n in enumerate(lengths):
        gold = path_score(crf, emissions[b, :n], tags[b, :n].tolist())
        log_z = log_sum_of_paths(crf, emissions[b, :n], all_paths(3, n))
        torch.testing.assert_close(log_likelihood[b], gold - log_z, **TOL)


def test_probabilities_of_all_sequences_of_a_padded_row_sum_to_one():
    crf, length, width = random_crf(3, seed=3), 3, 5
    emissions = torch.randn(1, width, 3, dtype=torch.float64)
    mask = prefix_mask([length], width)
    paths = all_paths(3, length)
    log_p = torch.cat([crf.log_likelihood(emissions, padded_tags(p, width), mask) for p in paths])
    assert log_p.exp().sum().item() == pytest.approx(1.0, abs=1e-12)


def test_zero_initialisation_is_a_per_word_softmax():
    # with zero start, end and transition scores, log p(y | x) = sum_w log_softmax(E[w])[y_w]
    crf, width = CRF(4).double(), 3
    emissions = torch.randn(2, width, 4, dtype=torch.float64)
    tags, mask = torch.randint(0, 4, (2, width)), prefix_mask([3, 2], width)
    per_word = emissions.log_softmax(-1).gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, W)
    torch.testing.assert_close(crf.log_likelihood(emissions, tags, mask), (per_word * mask).sum(1), **TOL)


# ----- Viterbi ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_viterbi_matches_brute_force_argmax(seed):
    crf, lengths, width = random_crf(3, seed=seed), [4, 1, 3, 2], 4
    emissions = torch.randn(len(lengths), width, 3, dtype=torch.float64)  # continuous: ties have prob. 0
    decoded = crf.decode(emissions, prefix_mask(lengths, width))
    for b, n in enumerate(lengths):
        best = max(all_paths(3, n), key=lambda p: path_score(crf, emissions[b, :n], p))
        assert decoded[b] == list(best)


def test_sequences_of_length_one():
    crf, emissions = random_crf(4, seed=4), torch.randn(3, 1, 4, dtype=torch.float64)  # W = 1: no loop
    mask, tags = torch.ones(3, 1, dtype=torch.long), torch.tensor([[0], [2], [3]])
    unary = crf.start_transitions + emissions[:, 0] + crf.end_transitions  # (B, K): the whole path score
    torch.testing.assert_close(crf.log_partition(emissions, mask), unary.logsumexp(1), **TOL)
    torch.testing.assert_close(crf.score(emissions, tags, mask), unary.gather(1, tags).squeeze(1), **TOL)
    assert crf.decode(emissions, mask) == [[t] for t in unary.argmax(1).tolist()]


# ----- padding ------------------------------------------------------------------------------------------


def test_padding_does_not_change_the_result():
    crf = random_crf(3, seed=5)
    short, tags = torch.randn(1, 2, 3, dtype=torch.float64), torch.tensor([[2, 1]])
    alone = torch.ones(1, 2, dtype=torch.bool)
    longer = torch.randn(1, 5, 3, dtype=torch.float64)
    garbage = 100 * torch.randn(1, 3, 3, dtype=torch.float64)  # padded emissions must be ignored
    emissions = torch.cat([longer, torch.cat([short, garbage], dim=1)])  # (2, 5, 3)
    batch_tags = torch.tensor([[0, 1, 2, 0, 1], [2, 1, -100, 7, 0]])  # padded tags: anything, even -100
    mask = prefix_mask([5, 2], 5)
    torch.testing.assert_close(crf.log_likelihood(emissions, batch_tags, mask)[1:],
                               crf.log_likelihood(short, tags, alone), **TOL)
    torch.testing.assert_close(crf.log_partition(emissions, mask)[1:], crf.log_partition(short, alone), **TOL)
    assert crf.decode(emissions, mask)[1] == crf.decode(short, alone)[0]
    assert [len(path) for path in crf.decode(emissions, mask)] == [5, 2]


def test_long_mask_of_zeros_and_ones_equals_bool_mask():
    crf, emissions = random_crf(3, seed=6), torch.randn(2, 3, 3, dtype=torch.float64)
    tags, mask = torch.zeros(2, 3, dtype=torch.long), prefix_mask([3, 1], 3)
    torch.testing.assert_close(crf.log_likelihood(emissions, tags, mask.long()),
                               crf.log_likelihood(emissions, tags, mask), **TOL)
    assert crf.decode(emissions, mask.long()) == crf.decode(emissions, mask)


# ----- IOB2 constraints ---------------------------------------------------------------------------------


def test_iob2_table_forbids_exactly_the_invalid_transitions():
    start, allowed = iob2_allowed(IOB2_TAGS)
    assert start.tolist() == [True, True, False, True, False]  # no sequence starts inside an entity
    forbidden = {(O, I_PER), (O, I_LOC), (B_PER, I_LOC), (I_PER, I_LOC), (B_LOC, I_PER), (I_LOC, I_PER)}
    assert {(i, j) for i in range(5) for j in range(5) if not allowed[i, j]} == forbidden
    crf = CRF(5, IOB2_TAGS)
    assert (crf.transition_constraint == torch.where(allowed, 0.0, FORBIDDEN)).all()
    assert set(crf.state_dict()) == {"start_transitions", "end_transitions", "transitions"}
    assert (CRF(5).transition_constraint == 0).all() and (CRF(5).start_constraint == 0).all()


def test_bad_tag_names_raise():
    with pytest.raises(ValueError, match="'X-PER' is not IOB2"):
        CRF(2, ["O", "X-PER"])
    with pytest.raises(ValueError, match="num_tags is 3 but 2 tag names"):
        CRF(3, ["O", "B-PER"])


def test_viterbi_never_follows_o_with_i_even_when_emissions_ask_for_it():
    # position 0 strongly O; position 1 prefers I-PER (8) over B-PER (1): "O I-PER" would score 18
    emissions = torch.full((1, 2, 5), -5.0, dtype=torch.float64)
    emissions[0, 0, O], emissions[0, 1, I_PER], emissions[0, 1, B_PER] = 10.0, 8.0, 1.0
    mask = torch.ones(1, 2, dtype=torch.bool)
    assert CRF(5).double().decode(emissions, mask) == [[O, I_PER]]  # unconstrained: the emissions win
    assert CRF(5, IOB2_TAGS).double().decode(emissions, mask) == [[O, B_PER]]  # 11 beats B-PER I-PER (8)
    starts_inside = torch.zeros(1, 1, 5, dtype=torch.float64)
    starts_inside[0, 0, I_LOC] = 50.0
    assert CRF(5, IOB2_TAGS).decode(starts_inside, torch.ones(1, 1)) != [[I_LOC]]


def test_constrained_viterbi_is_the_best_valid_path_and_never_invalid():
    crf, lengths, width = random_crf(5, IOB2_TAGS, seed=7), [3, 2, 1, 3], 3
    emissions = 20 * torch.randn(len(lengths), width, 5, dtype=torch.float64)  # strong, often invalid wishes
    decoded = crf.decode(emissions, prefix_mask(lengths, width))
    for b, n in enumerate(lengths):
        valid = [p for p in all_paths(5, n) if is_iob2(p)]
        assert decoded[b] == list(max(valid, key=lambda p: path_score(crf, emissions[b, :n], p)))


def test_forbidden_sequences_have_zero_probability():
    crf, length, width = random_crf(5, IOB2_TAGS, seed=8), 3, 4
    emissions = 5 * torch.randn(1, width, 5, dtype=torch.float64)
    mask = prefix_mask([length], width)
    paths = all_paths(5, length)
    p = torch.cat([crf.log_likelihood(emissions, padded_tags(path, width), mask) for path in paths]).exp()
    invalid = torch.tensor([not is_iob2(path) for path in paths])
    assert invalid.sum() > 0 and p[invalid].max().item() < 1e-300  # e^-10000 underflows to 0
    assert p[~invalid].sum().item() == pytest.approx(1.0, abs=1e-12)
    # log Z is the logsumexp over the valid paths alone, scored with the raw parameters
    valid = [q for q in paths if is_iob2(q)]
    torch.testing.assert_close(crf.log_partition(emissions, mask),
                               log_sum_of_paths(crf, emissions[0, :length], valid).view(1), **TOL)


# ----- gradients ----------------------------------------------------------------------------------------


def test_loss_backward_gives_finite_gradients_even_for_an_invalid_gold_sequence():
    crf = CRF(5, IOB2_TAGS)  # float32, as in training
    emissions = torch.randn(2, 4, 5, requires_grad=True)
    tags = torch.tensor([[O, I_PER, I_PER, O], [B_LOC, I_LOC, 0, 0]])  # row 0 breaks IOB2: O -> I-PER
    loss = crf(emissions, tags, prefix_mask([4, 2], 4))
    loss.backward()
    assert torch.isfinite(loss) and loss.item() > 1000  # about -FORBIDDEN / 2: huge but finite
    gradients = (emissions.grad, crf.start_transitions.grad, crf.end_transitions.grad, crf.transitions.grad)
    for gradient in gradients:
        assert gradient is not None and torch.isfinite(gradient).all()


def test_gradcheck_log_likelihood_wrt_emissions():
    crf, lengths = random_crf(3, IOB2_TAGS[:3], seed=9), [3, 1]
    emissions = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    tags, mask = torch.tensor([[1, 2, 0], [0, 0, 0]]), prefix_mask(lengths, 3)
    assert torch.autograd.gradcheck(lambda e: crf.log_likelihood(e, tags, mask), (emissions,))


def test_gradcheck_loss_wrt_transition_parameters():
    crf = random_crf(3, seed=10)
    emissions = torch.randn(2, 3, 3, dtype=torch.float64)
    tags, mask = torch.tensor([[1, 2, 0], [2, 0, 0]]), prefix_mask([3, 2], 3)
    names = ("start_transitions", "end_transitions", "transitions")
    parameters = tuple(getattr(crf, name).detach().clone().requires_grad_() for name in names)

    def loss(*values):
        return functional_call(crf, dict(zip(names, values)), (emissions, tags, mask))

    assert torch.autograd.gradcheck(loss, parameters)


# ----- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask, message", [
    ([[0, 1, 1], [1, 1, 0]], r"first position must be on in every sequence; rows \[0\]"),
    ([[1, 1, 1], [1, 0, 1]], r"prefix of ones per row .* rows \[1\]"),
    ([[1, 2, 0], [1, 1, 1]], "only 0 .* and 1"),
    ([[1, 1], [1, 1]], r"mask must be \(B, W\) = \(2, 3\), got \(2, 2\)"),
])
def test_bad_mask_raises(mask, message):
    crf, emissions, tags = CRF(3), torch.randn(2, 3, 3), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=message):
        crf(emissions, tags, torch.tensor(mask))
    with pytest.raises(ValueError, match=message):
        crf.decode(emissions, torch.tensor(mask))


def test_bad_tags_and_emissions_raise():
    crf, emissions, mask = CRF(3), torch.randn(2, 3, 3), prefix_mask([3, 2], 3)
    with pytest.raises(ValueError, match=r"tags at unmasked positions must lie in \[0, 3\)"):
        crf(emissions, torch.tensor([[0, 1, 3], [0, 1, 99]]), mask)  # 99 is padding (fine); 3 is not
    with pytest.raises(ValueError, match=r"emissions must be \(B, W, K=3\)"):
        crf.decode(torch.randn(2, 3, 4), mask)


# ----- parity with pytorch-crf --------------------------------------------------------------------------


def test_parity_with_pytorch_crf():
    torchcrf = pytest.importorskip("torchcrf", reason="pytorch-crf is not installed")
    crf, lengths, width = random_crf(4, seed=11), [4, 2, 1], 4
    reference = torchcrf.CRF(4, batch_first=True).double()
    reference.load_state_dict(crf.state_dict())  # same names, same T[i, j] = i then j convention
    emissions, tags = torch.randn(3, width, 4, dtype=torch.float64), torch.randint(0, 4, (3, width))
    mask = prefix_mask(lengths, width)
    torch.testing.assert_close(crf.log_likelihood(emissions, tags, mask),
                               reference(emissions, tags, mask, reduction="none"), **TOL)
    assert crf.decode(emissions, mask) == reference.decode(emissions, mask)
    assert math.isclose(crf(emissions, tags, mask).item(),
                        -reference(emissions, tags, mask, reduction="mean").item(), abs_tol=1e-10)

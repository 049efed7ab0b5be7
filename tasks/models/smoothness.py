"""SMART's smoothness-inducing adversarial regulariser (Jiang et al. 2020, "SMART", eq. 2 and Algorithm 1).

A model fine-tuned on a few thousand sentences can change its prediction a lot for a tiny change of its
input. SMART adds the largest change a small perturbation of the word vectors can cause,

    R_s = max over the perturbation d of  KL_sym( f(x + d), f(x) ),

to the task loss, so that training flattens the model around every training sentence. The max is found
approximately, as MT-DNN (the authors' code) does: start from Gaussian noise, take one gradient step on the
divergence, and rescale the step per token so that its largest coordinate is 1 (the infinity norm; MT-DNN's
radius, which --smart-radius changes).

Shape legend: B batch, T tokens, C hidden size, K classes.

Read next: ../multitask.py (RegularisedSentimentTask, which adds R_s to SST's loss with --smart).
"""

from __future__ import annotations

from typing import Callable

import torch

from tasks.models.heads import symmetric_kl

# MT-DNN's settings for SMART: the starting noise's standard deviation, the ascent step, and the small number
# that keeps the per-token rescaling finite.
NOISE_STD = 1e-5
STEP_SIZE = 1e-3
EPSILON = 1e-6


def adversarial_direction(logits_of: Callable[[torch.Tensor], torch.Tensor], embeds: torch.Tensor,
                          clean_logits: torch.Tensor, noise: torch.Tensor | None = None,
                          radius: float = 1.0) -> torch.Tensor:
    """The perturbation d (B, T, C) of the word vectors that moves the prediction most, by one ascent step.

    logits_of: word vectors (B, T, C) -> logits (B, K); embeds: the batch's word vectors (B, T, C);
    clean_logits: the prediction for embeds, (B, K); noise: the starting point (default Gaussian, NOISE_STD);
    radius: each token's largest coordinate of d (MT-DNN: 1).
    No gradient reaches the model from here: d is a constant for the loss that uses it.
    """
    if noise is None:
        noise = torch.randn_like(embeds) * NOISE_STD
    noise = noise.detach().requires_grad_()
    divergence = symmetric_kl(logits_of(embeds.detach() + noise), clean_logits.detach())
    (grad,) = torch.autograd.grad(divergence, noise)  # (B, T, C)
    step = noise.detach() + STEP_SIZE * grad
    return radius * step / (step.abs().amax(-1, keepdim=True) + EPSILON)  # each token's largest: radius


def adversarial_smoothness(logits_of: Callable[[torch.Tensor], torch.Tensor], embeds: torch.Tensor,
                           clean_logits: torch.Tensor, noise: torch.Tensor | None = None,
                           radius: float = 1.0) -> torch.Tensor:
    """R_s: the symmetric KL between the prediction for the perturbed word vectors and the clean one.

    Three passes through the model in all for SMART (the clean one the caller made, the ascent step, this
    one); the gradient flows through this pass and through clean_logits.
    """
    direction = adversarial_direction(logits_of, embeds, clean_logits, noise, radius)
    return symmetric_kl(logits_of(embeds + direction), clean_logits)

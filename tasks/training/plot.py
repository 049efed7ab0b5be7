"""The run's plot: loss_and_dev.png, every step's training loss and the dev metrics over whole epochs.

The loop redraws it after each epoch; matplotlib is imported only then.

Read next: loop.py (which writes the run folder, its checkpoints, best/ and the plot).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from minbert.loading.atomic import atomic_write


def plot_history(history: list[dict], path: Path, step_losses: dict | None = None) -> None:
    """A PNG of two panels over the epochs, ticked at whole epochs: every task's training loss (each step's,
    faint, with its moving average and the epoch means as dots) and every dev metric after each epoch."""
    import matplotlib

    matplotlib.use("Agg")  # no screen needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [r["epoch"] for r in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, task in enumerate(history[0]["train_loss"]):
        points = (step_losses or {}).get(task) or []
        if points:
            places, losses = zip(*points)
            left.plot(places, losses, color=f"C{i}", alpha=0.2, linewidth=0.6)
            left.plot(places, moving_average(losses), color=f"C{i}", linewidth=1.8, label=task)
        means = [(r["epoch"], r["train_loss"][task]) for r in history
                 if r["train_loss"].get(task) is not None]
        if means:
            left.plot(*zip(*means), "o", color=f"C{i}", markeredgecolor="black",
                      label=None if points else f"{task} (epoch mean)")
    if all(loss > 0 for losses in (step_losses or {}).values() for _, loss in losses):
        left.set_yscale("log")  # the tasks' losses differ by orders of magnitude
    left.set(title="training loss (steps, moving average, epoch means)", xlabel="epoch", ylabel="loss")
    if left.get_legend_handles_labels()[0]:
        left.legend(fontsize="small")
    for task in history[0]["dev"]:
        for metric in history[0]["dev"][task]:
            right.plot(epochs, [r["dev"][task][metric] for r in history], marker="o",
                       label=f"{task} {metric}")
    right.plot(epochs, [r["overall"] for r in history], marker="s", color="black", label="overall")
    right.set(title="dev metrics", xlabel="epoch")
    right.legend(fontsize="small")
    for axes in (left, right):
        axes.set_xlim(0, max(max(epochs), 1) * 1.02)  # room for the last epoch's dots
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
        axes.grid(alpha=0.3)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    plt.close(fig)


def moving_average(values: Sequence[float]) -> list[float]:
    """An exponential moving average, debiased at the start (as TensorBoard's smoothing), over about a
    twentieth of the points (at most 50)."""
    span = min(50, max(1, len(values) // 20))
    decay = 1 - 2 / (span + 1)
    average, out = 0.0, []
    for n, value in enumerate(values, start=1):
        average = decay * average + (1 - decay) * value
        out.append(average / (1 - decay ** n) if decay else average)
    return out

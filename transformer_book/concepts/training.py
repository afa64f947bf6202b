"""Chapter 9's concept picture: the learning-rate schedule and label smoothing, side by side.

Left, the Noam schedule of the paper (Vaswani et al., 2017, section 5.3) for the base model: the
rate rises linearly for ``warmup`` steps, peaks, then decays as ``1/sqrt(step)``. Every point is
:func:`~transformer_lib.noam_rate`. Right, the target of one position with ``K`` classes: the
one-hot target beside the label-smoothed one, ``(1 - eps) * onehot + eps / K`` (PyTorch's
definition, the one ``F.cross_entropy(label_smoothing=eps)`` uses).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from transformer_lib.training.schedule import noam_rate

from ._style import COLOURS, FONT, INK, MAX_WIDTH, MUTED, SMALL, TITLE

__all__ = ["FIGURES", "noam_curve", "smoothed_target", "training_figure"]


def noam_curve(d_model: int = 512, warmup: int = 4000) -> tuple[list[int], list[float]]:
    """The optimizer steps ``1, 50, 100, ..., 40000`` (and ``warmup``) and the Noam rate at each."""
    steps = sorted({1, warmup, *range(50, 40_001, 50)})
    return steps, [noam_rate(s, d_model, warmup) for s in steps]


def smoothed_target(
    num_classes: int = 5, correct: int = 2, eps: float = 0.1
) -> tuple[torch.Tensor, torch.Tensor]:
    """The one-hot target of class ``correct`` and its label-smoothed version.

    Shape:
        both: ``(num_classes,)``; each sums to 1.
    """
    one_hot = F.one_hot(torch.tensor(correct), num_classes).float()
    return one_hot, (1 - eps) * one_hot + eps / num_classes


def _schedule(ax: Axes, d_model: int, warmup: int) -> None:
    steps, rates = noam_curve(d_model, warmup)
    peak = rates[steps.index(warmup)]
    ax.plot(steps, rates, color="#1f77b4", lw=2.2)
    ax.fill_between(steps, rates, color="#1f77b4", alpha=0.12, lw=0)
    ax.plot([warmup], [peak], "o", color=INK, ms=5)
    ax.annotate(
        f"peak at step {warmup:,}\nrate {peak:.1e}",
        xy=(warmup, peak),
        xytext=(warmup + 5000, peak * 0.98),
        fontsize=SMALL,
        color=INK,
        va="top",
        arrowprops={"arrowstyle": "-", "color": MUTED, "lw": 0.8},
    )
    rise = warmup // 2
    ax.annotate(
        "warm-up:\nlinear rise",
        xy=(rise, noam_rate(rise, d_model, warmup)),
        xytext=(warmup + 2500, peak * 0.3),
        fontsize=SMALL,
        color=INK,
        arrowprops={"arrowstyle": "-", "color": MUTED, "lw": 0.8},
    )
    late = int(steps[-1] * 0.62)
    ax.text(
        late,
        noam_rate(late, d_model, warmup) + peak * 0.12,
        "decay as 1/sqrt(step)",
        fontsize=SMALL,
        color=INK,
        ha="center",
    )
    ax.set_xlim(0, steps[-1])
    ax.set_ylim(0, peak * 1.25)
    ax.set_xticks([warmup, 20_000, 40_000], [f"{warmup:,}", "20,000", "40,000"])
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    ax.yaxis.get_offset_text().set_fontsize(SMALL)
    ax.tick_params(labelsize=SMALL)
    ax.set_xlabel("optimizer step", fontsize=FONT)
    ax.set_ylabel("learning rate", fontsize=FONT)
    ax.set_title(f"Noam schedule (d_model {d_model})", fontsize=TITLE, color=INK)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _smoothing(ax: Axes, num_classes: int, correct: int, eps: float) -> None:
    one_hot, smooth = smoothed_target(num_classes, correct, eps)
    width = 0.38
    left = [k - width / 2 for k in range(num_classes)]
    ax.bar(
        left, one_hot.tolist(), width, color=COLOURS["mask"], edgecolor=INK, lw=0.7, label="one-hot"
    )
    ax.bar(
        [k + width / 2 for k in range(num_classes)],
        smooth.tolist(),
        width,
        color=COLOURS["output"],
        edgecolor=INK,
        lw=0.7,
        label="smoothed",
    )
    ax.text(
        correct + width + 0.05,
        smooth[correct].item(),
        f"{smooth[correct].item():.2f}",
        ha="left",
        va="center",
        fontsize=SMALL,
        color=INK,
    )
    other = (correct + 1) % num_classes
    ax.annotate(
        f"{smooth[other].item():.2f} each",
        xy=(other + width / 2, smooth[other].item()),
        xytext=(other + width / 2, 0.3),
        ha="center",
        fontsize=SMALL,
        color=INK,
        arrowprops={"arrowstyle": "-", "color": MUTED, "lw": 0.8},
    )
    labels = [f"{k}\ncorrect" if k == correct else str(k) for k in range(num_classes)]
    ax.set_xticks(range(num_classes), labels)
    ax.tick_params(labelsize=SMALL)
    ax.set_ylim(0, 1.4)  # room above the bars for the legend
    ax.set_yticks([0, 0.5, 1])
    ax.set_xlabel("class (next word)", fontsize=FONT)
    ax.set_ylabel("target probability", fontsize=FONT)
    ax.set_title(f"Label smoothing (eps = {eps:g})", fontsize=TITLE, color=INK)
    ax.legend(fontsize=SMALL, frameon=False, loc="upper left", ncol=2)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def training_figure() -> Figure:
    """Left: the Noam learning rate against the optimizer step (``d_model = 512``, 4,000 warmup
    steps). Right: a one-hot target of 5 classes and its smoothed version (``eps = 0.1``).
    """
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(MAX_WIDTH - 0.2, 3.4), gridspec_kw={"width_ratios": [1.3, 1.0]}
    )
    fig.patch.set_facecolor("white")
    _schedule(left, 512, 4000)
    _smoothing(right, 5, 2, 0.1)
    fig.tight_layout(w_pad=2.0)
    return fig


FIGURES = {"training_tricks.svg": training_figure}

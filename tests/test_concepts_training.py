"""Chapter 9's concept picture: the Noam schedule and label smoothing, with computed numbers."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from transformer_book.concepts import _style  # noqa: E402
from transformer_book.concepts.training import noam_curve, smoothed_target, training_figure  # noqa: E402
from transformer_lib import noam_rate  # noqa: E402

pytestmark = pytest.mark.book


def test_the_schedule_rises_to_its_peak_at_the_warmup_and_then_decays() -> None:
    steps, rates = noam_curve(d_model=512, warmup=4000)
    peak = steps[rates.index(max(rates))]
    assert peak == 4000 and math.isclose(max(rates), (512 * 4000) ** -0.5)
    assert rates == [noam_rate(s, 512, 4000) for s in steps]
    rising, falling = rates[: steps.index(4000) + 1], rates[steps.index(4000) :]
    assert rising == sorted(rising) and falling == sorted(falling, reverse=True)


def test_the_smoothed_target_moves_eps_of_the_mass_evenly_over_every_class() -> None:
    one_hot, smooth = smoothed_target(num_classes=5, correct=2, eps=0.1)
    assert one_hot.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    torch.testing.assert_close(smooth, torch.tensor([0.02, 0.02, 0.92, 0.02, 0.02]))
    assert math.isclose(smooth.sum().item(), 1.0, rel_tol=1e-6)


def test_the_figure_shows_the_computed_numbers_readably() -> None:
    fig = training_figure()
    texts = [t for ax in fig.axes for t in ax.texts]
    shown = [t.get_text() for t in texts]
    assert f"peak at step 4,000\nrate {(512 * 4000) ** -0.5:.1e}" in shown
    assert "0.92" in shown and "0.02 each" in shown
    assert fig.get_size_inches()[0] <= _style.MAX_WIDTH
    every_text = texts + [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    every_text += [t for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert min(t.get_fontsize() for t in every_text if t.get_text()) >= _style.SMALL
    plt.close("all")


@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_other_smoothing_rates_still_sum_to_one(eps: float) -> None:
    _, smooth = smoothed_target(num_classes=7, correct=0, eps=eps)
    assert math.isclose(smooth.sum().item(), 1.0, rel_tol=1e-6) and math.isclose(
        smooth[0].item(), 1 - eps + eps / 7, rel_tol=1e-6
    )

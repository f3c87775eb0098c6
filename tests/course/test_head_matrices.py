"""The one-head figure (chapter 5) reads in the order of the formula: scores -> softmax -> A_i, then A_i · V_i = head_i.

The matrices are found by their numbers (computed here, not read from the figure's code), the arrow by its drawn
path, so the test holds for any way of drawing them.
"""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from mha.course.pictures import plot_head_matrices  # noqa: E402

CASES = {"chapter 5": (4, 4, 64, 64), "small": (3, 5, 4, 2), "more keys": (4, 6, 64, 64), "long": (9, 12, 64, 8)}


def _drawn(L, S, d_k, d_v):
    torch.manual_seed(0)
    q, k, v = torch.randn(L, d_k), torch.randn(S, d_k), torch.randn(S, d_v)
    scores = q @ k.T / d_k ** 0.5                                   # (L, S)
    weights = torch.softmax(scores, dim=-1)                         # (L, S)
    fig = plot_head_matrices(q, k, v)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()

    def box(matrix):
        found = [im for im in fig.findobj(AxesImage)
                 if im.get_array().shape == matrix.shape and np.allclose(im.get_array(), matrix.numpy(), atol=1e-5)]
        assert len(found) == 1, f"expected one image of the {tuple(matrix.shape)} matrix, found {len(found)}"
        return found[0].get_window_extent(renderer)

    arrows = fig.findobj(FancyArrowPatch) + [getattr(t, "arrow_patch", None) for t in fig.findobj(Text)]  # annotate()
    arrows = [a for a in arrows if a is not None and a.get_visible()]
    assert len(arrows) == 1, f"expected the one softmax arrow, found {len(arrows)}"
    drawn = arrows[0].get_transform().transform_path(arrows[0].get_path())
    path = np.array([xy for xy, code in drawn.iter_segments(simplify=False, curves=False)
                     if code != drawn.CLOSEPOLY])[:, :2]                      # display px
    texts = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    images = [im.get_window_extent(renderer) for im in fig.findobj(AxesImage)]
    return fig, box(scores), box(weights), path, texts, images


@pytest.mark.parametrize("sizes", CASES.values(), ids=CASES.keys())
def test_the_softmax_arrow_leads_from_the_scores_to_the_weights(sizes):
    fig, scores, weights, path, texts, images = _drawn(*sizes)
    plt.close(fig)
    start, tip = path[np.argmax(path[:, 1])], path[np.argmin(path[:, 1])]   # it runs down: top end, bottom end
    assert scores.x0 <= start[0] <= scores.x1 and start[1] < scores.y0, (
        f"the arrow should start below the scores (x {scores.x0:.0f}..{scores.x1:.0f}), starts at {start.round()}")
    assert weights.x0 <= tip[0] <= weights.x1, (
        f"the arrow ends at x = {tip[0]:.0f} px, not over A_1 (x {weights.x0:.0f}..{weights.x1:.0f} px)")
    assert weights.y1 < tip[1] < scores.y0, f"the arrow should end above A_1 and below the scores, ends at {tip[1]:.0f}"
    # it ends above A_1's name, not on it, and the label says what the step is
    name = [b for _, b in texts if b.x0 < tip[0] < b.x1 and weights.y1 <= b.y0 < tip[1]]
    assert name, "A_1 has a name under the arrow's end"
    assert all(b.y1 <= tip[1] + 2 for b in name), "the arrow strikes through A_1's name"
    assert any("softmax" in t for t, _ in texts)
    # between its ends it crosses no matrix
    segments = np.concatenate([np.linspace(a, b, 50) for a, b in zip(path[:-1], path[1:])])
    for im in images:
        inside = ((segments[:, 0] > im.x0 + 1) & (segments[:, 0] < im.x1 - 1)
                  & (segments[:, 1] > im.y0 + 1) & (segments[:, 1] < im.y1 - 1))
        assert not inside.any(), f"the arrow crosses the matrix at {im}"


@pytest.mark.parametrize("sizes", CASES.values(), ids=CASES.keys())
def test_every_matrix_is_drawn_whole(sizes):
    """More keys widen the figure (and lengthen V_i) instead of cutting a matrix at the axes' edge."""
    fig, *_, images = _drawn(*sizes)
    axes = fig.axes[0].get_window_extent()
    plt.close(fig)
    assert all(axes.x0 - 1 <= im.x0 and im.x1 <= axes.x1 + 1 and axes.y0 - 1 <= im.y0 and im.y1 <= axes.y1 + 1
               for im in images), "a matrix is cut off at the edge"

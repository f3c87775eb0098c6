"""The explorer scenarios under Colab's ipywidgets 7.7.1, in-process and in a kernel (inside `nox -s colab`)."""
import matplotlib.pyplot as plt
import pytest
from nbclient import NotebookClient

from widget_scenarios import SCENARIOS, assert_kernel_outputs, kernel_notebook


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_scenario_under_colab_ipywidgets(scenario):
    import ipywidgets

    assert ipywidgets.__version__ == "7.7.1"
    try:
        scenario()
    finally:
        plt.close("all")


def test_widgets_in_a_colab_kernel(kernel_name, tmp_path):
    nb = kernel_notebook()
    NotebookClient(nb, timeout=120, kernel_name=kernel_name, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert_kernel_outputs(nb)

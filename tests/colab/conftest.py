import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/: widget_scenarios

from test_colab_env import kernel_name  # noqa: E402,F401  (a fixture shared by both files)

import pathlib

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield

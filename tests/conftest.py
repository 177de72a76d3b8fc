"""What many test modules share: the profile catalogue, the Pixel 3 and the PyTorch runtime
(loaded once per session), and fixtures for them. Test modules import the constants (they are
needed at collection, in ``parametrize``) or ask for the fixtures."""
from __future__ import annotations

import pytest

from swansim.dnn.runtime import load_runtime
from swansim.hw.profile import Catalogue

CAT = Catalogue.load()
PIXEL3 = CAT.device("pixel3")
PYTORCH = load_runtime("pytorch")


@pytest.fixture(scope="session")
def catalogue() -> Catalogue:
    return CAT


@pytest.fixture(scope="session")
def pixel3():
    """The Pixel 3's profile (a frozen DeviceSpec)."""
    return PIXEL3

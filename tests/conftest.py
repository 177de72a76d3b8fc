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


def train_on(plan, runtime=PYTORCH, group="top_app", batches=1, model="resnet34", batch=None):
    """A Pixel 3 at fixed top clocks and ambient temperatures after ``batches`` batches of
    ``model`` on ``plan``: (device, job)."""
    from swansim.device import Device, DeviceConfig
    from swansim.dnn.tasks import build_task
    from swansim.dnn.training import TrainingJob

    dev = Device(PIXEL3, DeviceConfig(governor="performance", thermal_governor="off", frozen_temps=True))
    job = TrainingJob(dev.env, dev.sched, PIXEL3.soc, build_task(model, batch), runtime, plan, n_batches=batches,
                      cpuset=PIXEL3.cpuset(group), cgroup=group)
    dev.env.run(until=job.process)
    dev.sched.sync()
    return dev, job

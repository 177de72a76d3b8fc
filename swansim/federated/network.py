"""What moving the model costs a client: download before training, upload after, at its network's rate.

FedScale's simulated clock, which the Swan paper's fleet ran on, adds to a client's computation
``(upload + download) / bandwidth`` with the model's serialised size each way
(fedscale/cloud/internal/client_metadata.py ``get_completion_time``; aggregator.py sizes the
update as the pickled model). Here the model's size is its fp32 parameters (`model_bytes`) and
the rate is the client's traced network at the moment of each transfer:

* ``wifi``: the global average fixed-broadband speeds of the Speedtest Global Index, September
  2020 - 85.73 Mbps down, 45.74 Mbps up (Ookla, as reported in "The global mobile and broadband
  internet speed ranking", my-financial-wealth.com, 2020-10-25). Assumption: a phone on Wi-Fi
  gets its line's speed.
* ``cellular``: the same index's global mobile averages - 35.96 Mbps down, 11.22 Mbps up.
* ``none``: no transfer: the client cannot check in, and one that loses its network before its
  upload drops out.

Clients differ: FedScale gives each client its own bandwidth (a MobiPerf measurement per device,
benchmark/dataset/README.md "Heterogeneous System Performance"), so the paper's rounds closed on a
spread of transfer times. That per-device table is not public in numbers, so each client here
gets a fixed factor on both rates of both networks (`rate_factor`): lognormal with mean 1, so the
fleet's average stays the index's, and log-sd `BANDWIDTH_SIGMA`.

Assumptions: one factor per client for both networks and directions (its place and plan decide
it); transfers are not interrupted by a change of network once started, and they draw no battery
energy (the energy loan is the training's; the paper's energy figures are the training's too).
"""
from __future__ import annotations

import numpy as np

from swansim.dnn.graph import BYTES_PER_ELEMENT
from swansim.dnn.tasks import build_task

# Mbps (10^6 bit/s), (down, up), per traced network
RATE_MBPS: dict[str, tuple[float, float]] = {"wifi": (85.73, 45.74), "cellular": (35.96, 11.22)}
# Log-sd of a client's rate factor. Assumption, from one quoted spread: Ookla's US fixed-broadband
# tests put the lowest 10% at 30.49 Mbps or less and the top 10% at 698.62 Mbps or more (an Ookla
# analyst as quoted in the press; no per-device table of Ookla's or MobiPerf's is published), a
# 22.9x span between the 10th and 90th percentiles: ln(22.9) / (2 x 1.2816) = 1.22 for a lognormal.
BANDWIDTH_SIGMA = 1.2


def model_bytes(model: str) -> float:
    """The bytes a round moves each way: the task's parameters in fp32."""
    return float(build_task(model).params * BYTES_PER_ELEMENT)


def rate_factor(rng: np.random.Generator, sigma: float = BANDWIDTH_SIGMA) -> float:
    """A client's rates over its network's average: lognormal with mean 1 and log-sd ``sigma``
    (1 for ``sigma`` 0, drawing nothing)."""
    return float(rng.lognormal(-0.5 * sigma * sigma, sigma)) if sigma > 0.0 else 1.0


def download_s(size_bytes: float, network: str, factor: float = 1.0) -> float:
    """Seconds to download ``size_bytes`` on ``network`` at ``factor`` times its average rate (inf
    without one)."""
    rate = RATE_MBPS.get(network)
    return 8.0 * size_bytes / (rate[0] * factor * 1e6) if rate else float("inf")


def upload_s(size_bytes: float, network: str, factor: float = 1.0) -> float:
    """Seconds to upload ``size_bytes`` on ``network`` at ``factor`` times its average rate (inf
    without one)."""
    rate = RATE_MBPS.get(network)
    return 8.0 * size_bytes / (rate[1] * factor * 1e6) if rate else float("inf")

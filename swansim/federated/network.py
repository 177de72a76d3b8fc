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

Assumptions: every client gets the global average (no per-client spread is modelled), transfers
are not interrupted by a change of network once started, and they draw no battery energy (the
energy loan is the training's; the paper's energy figures are the training's too).
"""
from __future__ import annotations

from swansim.dnn.graph import BYTES_PER_ELEMENT
from swansim.dnn.tasks import build_task

# Mbps (10^6 bit/s), (down, up), per traced network
RATE_MBPS: dict[str, tuple[float, float]] = {"wifi": (85.73, 45.74), "cellular": (35.96, 11.22)}


def model_bytes(model: str) -> float:
    """The bytes a round moves each way: the task's parameters in fp32."""
    return float(build_task(model).params * BYTES_PER_ELEMENT)


def download_s(size_bytes: float, network: str) -> float:
    """Seconds to download ``size_bytes`` on ``network`` (inf without one)."""
    rate = RATE_MBPS.get(network)
    return 8.0 * size_bytes / (rate[0] * 1e6) if rate else float("inf")


def upload_s(size_bytes: float, network: str) -> float:
    """Seconds to upload ``size_bytes`` on ``network`` (inf without one)."""
    rate = RATE_MBPS.get(network)
    return 8.0 * size_bytes / (rate[1] * 1e6) if rate else float("inf")

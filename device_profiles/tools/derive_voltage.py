"""Derive an OPP voltage curve for a cluster whose device tree lists no voltages.

Qualcomm trees give frequencies only (cpufreq-hw reads voltages from hardware). We map the
target frequency range linearly onto a same-core-type reference table that has voltages
(GS101, MT8183 upstream trees) and interpolate. Results are marked `voltage_derived = true`.

    python device_profiles/tools/derive_voltage.py a55 300 403.2 ... 1766.4
"""
from __future__ import annotations

import sys

import numpy as np

# (MHz, mV) from upstream device trees: exynos/google/gs101.dtsi and mediatek/mt8183.dtsi.
REFERENCE = {
    "a55": [(300, 537.5), (574, 600), (738, 618.75), (930, 668.75), (1098, 712.5), (1197, 731.25),
            (1328, 762.5), (1401, 781.25), (1598, 831.25), (1704, 862.5), (1803, 906.25)],
    "a76": [(400, 506.25), (553, 537.5), (696, 562.5), (799, 581.25), (910, 606.25), (1024, 625),
            (1197, 662.5), (1328, 687.5), (1491, 731.25), (1663, 775), (1836, 818.75), (1999, 868.75),
            (2130, 918.75), (2253, 968.75)],
    "x1": [(500, 500), (851, 556.25), (984, 575), (1106, 606.25), (1277, 631.25), (1426, 662.5),
           (1582, 693.75), (1745, 731.25), (1826, 750), (2048, 793.75), (2188, 831.25), (2252, 850),
           (2401, 887.5), (2507, 925), (2630, 968.75), (2704, 1000), (2802, 1056.25)],
    "a53": [(793, 650), (910, 687.5), (1014, 718.75), (1131, 756.25), (1248, 800), (1326, 818.75),
            (1417, 850), (1508, 868.75), (1586, 893.75), (1625, 906.25), (1677, 931.25), (1716, 943.75),
            (1781, 975), (1846, 1000), (1924, 1025), (1989, 1050)],
    "a73": [(793, 700), (910, 725), (1014, 750), (1131, 775), (1248, 800), (1326, 825), (1417, 850),
            (1508, 875), (1586, 900), (1625, 912.5), (1677, 931.25), (1716, 950), (1781, 975),
            (1846, 1000), (1924, 1025), (1989, 1050)],
}


def derive(ref: str, freqs_mhz: list[float]) -> list[float]:
    """Voltages (mV, rounded to 6.25 mV regulator steps) for ``freqs_mhz``, by range mapping."""
    rf, rv = np.array(REFERENCE[ref]).T
    f = np.asarray(freqs_mhz, dtype=float)
    x = rf[0] + (f - f[0]) / (f[-1] - f[0]) * (rf[-1] - rf[0])
    return [float(v) for v in np.round(np.interp(x, rf, rv) / 6.25) * 6.25]


if __name__ == "__main__":
    print(derive(sys.argv[1], [float(a) for a in sys.argv[2:]]))

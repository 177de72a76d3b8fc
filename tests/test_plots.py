"""Every figure reads without a footnote: axes labelled with a unit (or what the count or ratio
is), and no legend entry whose line lies invisibly under another's (same data, same style)."""
import numpy as np
import pandas as pd
import pytest

import swansim.plots as P


@pytest.fixture
def figures(monkeypatch, tmp_path):
    """The figures the plot functions make, kept instead of written."""
    made = []

    def keep(fig, path, dpi=110):
        fig.canvas.draw()
        made.append(fig)
        return path

    monkeypatch.setattr(P, "_save", keep)
    return made


def _landscape():
    choices = ["0", "0123", "4", "4567", "01234567/t4"]
    kinds = ["little", "little", "big", "big", "default"]
    return pd.DataFrame({"choice": choices, "kind": kinds, "latency_s": [8.5, 5.0, 0.8, 0.56, 0.6],
                         "energy_j": [3.0, 2.4, 1.3, 1.5, 1.5], "power_w": [0.35, 0.48, 1.5, 2.6, 2.6]})


def _timeline(scale=1.0):
    t = np.arange(0, 600, 10.0)
    df = pd.DataFrame({"time_s": t, "gflops": 80 - 0.02 * t * scale, "temp_big_c": 60 + 0.01 * t,
                       "temp_soc_c": 50 + 0.01 * t, "temp_battery_c": 25 + 0.02 * t, "temp_skin_c": 25 + 0.025 * t})
    for cl, fmax in (("little", 1766.4), ("big", 2803.2)):
        cap = np.where(t > 300, fmax * 0.7, fmax)
        df[f"freq_{cl}_mhz"] = cap
        df[f"cap_{cl}_mhz"] = cap
        df[f"limit_kernel_{cl}_mhz"] = np.full_like(t, fmax)
        df[f"limit_engine_{cl}_mhz"] = cap
    return df


def _rounds():
    rows = []
    for p, speed in (("swan", 2.0), ("pytorch-default", 1.0)):
        for r in range(1, 11):
            rows.append({"policy": p, "round": r, "time_h": r / speed, "accuracy": 0.3 + 0.02 * r,
                         "clients_online": 240 - (r if p == "pytorch-default" else 0), "energy_j": 100.0})
    return pd.DataFrame(rows)


def _all(tmp_path):
    P.landscape_bars({"resnet34": _landscape()}, tmp_path / "l.png",
                     pd.DataFrame({"model": ["resnet34"] * 2, "metric": ["latency", "latency"],
                                   "choice": ["0", "4"], "value": [1.0, 0.21]}))
    P.thermal_run(_timeline(), tmp_path / "t.png", "a phone", "big", [39.0, 41.0])
    same = _timeline()
    P.thermal_summary({("a", "big"): same, ("b", "big"): same.copy(), ("a", "little"): _timeline(0.5)},
                      ("big", "little"), tmp_path / "s.png")
    P.ux_drops(pd.DataFrame({"placement": ["pytorch-default"] * 2, "model": ["resnet34"] * 2, "device": ["a", "b"],
                             "drop_pct": [20.0, -3.0], "drop_min_pct": [19.0, -4.0], "drop_max_pct": [21.0, -2.0],
                             "seeds": [2, 2], "paper_drop_pct": [26.7, 7.0]}), tmp_path / "u.png")
    P.ux_jank(pd.DataFrame({"model": ["resnet34", "-"], "placement": ["pytorch-default", "none"],
                            "device": ["a", "a"], "app": ["browser", "browser"], "jank_pct": [2.0, 1.0]}),
              tmp_path / "j.png")
    P.policy_gains(pd.DataFrame({"device": ["a", "a"], "model": ["resnet34"] * 2, "policy": ["swan", "swan-layer"],
                                 "speedup": [1.5, 1.6], "energy_gain": [1.2, 1.3]}), tmp_path / "g.png")
    P.policy_ux(pd.DataFrame({"device": ["a", "a"], "model": ["resnet34"] * 2, "policy": ["swan", "pytorch-default"],
                              "ux_score_drop_pct": [2.0, 20.0]}), tmp_path / "x.png")
    P.adaptation_timeline(pd.DataFrame({"plan": ["4", "4", "0"], "purpose": ["explore", "train", "train"],
                                        "start_s": [0.0, 1.0, 2.0], "latency_s": [1.0, 1.0, 8.0]}),
                          pd.DataFrame({"kind": ["select"], "time_s": [1.0]}), tmp_path / "a.png")
    rounds = _rounds()
    summary = pd.DataFrame({"policy": ["swan", "pytorch-default"], "time_to_target_h": [1.0, 2.0],
                            "energy_to_target_j": [1000.0, 3000.0], "speedup": [2.0, 1.0],
                            "energy_efficiency": [3.0, 1.0]})
    P.fleet_curves({"resnet34": rounds}, {"resnet34": summary}, tmp_path / "f.png", 0.35)


def _axes_with_data(fig):
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and (ax.lines or ax.patches or ax.collections)]


def test_every_axis_is_labelled_with_its_unit(figures, tmp_path):
    _all(tmp_path)
    assert len(figures) == 9
    for fig in figures:
        for ax in _axes_with_data(fig):
            # a panel sharing its y axis is labelled by the panel that shows it
            ys = [a.get_ylabel() for a in ax.get_shared_y_axes().get_siblings(ax)]
            assert any("(" in y and ")" in y for y in ys), f"{ax.get_title()!r}: y axis {ys!r} has no unit"
            # a panel sharing its x axis is labelled by the panel that shows it
            has_x = any(a.get_xlabel() or any(t.get_text() for t in a.get_xticklabels())
                        for a in ax.get_shared_x_axes().get_siblings(ax))
            assert has_x, f"{ax.get_title()!r}: x axis unlabelled"


def test_no_legend_entry_hides_under_another(figures, tmp_path):
    _all(tmp_path)
    for fig in figures:
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            shown = {h.get_label() for h in ax.get_lines()} & {t.get_text() for t in legend.get_texts()}
            lines = [ln for ln in ax.get_lines() if ln.get_label() in shown and len(ln.get_xdata())]
            for i, a in enumerate(lines):
                for b in lines[i + 1:]:
                    same_data = (np.array_equal(np.asarray(a.get_xdata(), float), np.asarray(b.get_xdata(), float))
                                 and np.array_equal(np.asarray(a.get_ydata(), float),
                                                    np.asarray(b.get_ydata(), float)))
                    dlw = abs(a.get_linewidth() - b.get_linewidth())
                    # on the same data a line hides another of its colour unless one is a wide band,
                    # and any other of its dash pattern and width
                    hidden = (a.get_color() == b.get_color() and dlw < 2.0) or \
                             (a.get_linestyle() == b.get_linestyle() and dlw < 0.3)
                    assert not (same_data and hidden), f"{a.get_label()!r} and {b.get_label()!r} coincide unseen"


def test_the_fleet_figure_names_its_learner_and_states_a_flat_online_count(figures, tmp_path):
    rounds = _rounds()
    rounds["clients_online"] = 240
    summary = pd.DataFrame({"policy": ["swan", "pytorch-default"], "time_to_target_h": [1.0, np.nan],
                            "energy_to_target_j": [1000.0, np.nan], "speedup": [np.nan, 1.0],
                            "energy_efficiency": [np.nan, 1.0]})
    P.fleet_curves({"resnet34": rounds}, {"resnet34": summary}, tmp_path / "f.png", 0.35)
    fig = figures[-1]
    assert "logistic regression" in fig._suptitle.get_text()
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "240 clients online throughout" in texts and "target not reached" in texts

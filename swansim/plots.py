"""Every figure, drawn from tidy frames. Matplotlib (Agg backend) is imported on first use, so
commands that draw nothing never pay for it."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from swansim.results import atomic


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Path, dpi: int = 110) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # no timestamp in the file: the same data give the same bytes; written whole or not at all
    with atomic(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png",
                    metadata={"Software": None} if path.suffix == ".png" else None)
    _plt().close(fig)
    return path


# -- landscapes ---------------------------------------------------------------------------------


def landscape_bars(frames: dict[str, pd.DataFrame], path: Path, paper: pd.DataFrame | None = None,
                   title: str = "") -> Path:
    """Latency, energy and power per execution choice, in their own units, PyTorch's default drawn.

    ``frames``: model -> landscape frame (its ``default`` row is the baseline: a grey bar and a
    dashed line across the panel). ``paper``: optional tidy frame (model, metric, choice, value) of
    the Swan paper's Fig. 2, each normalised to the paper's worst plotted choice (value 1.00); its
    values are drawn as black ticks scaled to our value at that same choice, so a tick level with
    its bar agrees with the paper and the axis keeps its unit. One row of panels per model, one
    panel per metric. Choice labels are strings ("0123" stays "0123").
    """
    plt = _plt()
    metrics = (("latency_s", "latency", "latency per batch (s)"), ("energy_j", "energy", "energy per batch (J)"),
               ("power_w", "power", "power above idle (W)"))
    fig, axes = plt.subplots(len(frames), len(metrics), figsize=(13, 3.3 * len(frames)), squeeze=False)
    for row, (model, df) in zip(axes, frames.items()):
        df = df.reset_index(drop=True)
        labels = df["choice"].astype(str)
        base = df.index[df["kind"] == "default"]
        colors = ["0.6" if k == "default" else "C0" for k in df["kind"]]
        for ax, (m, name, axis) in zip(row, metrics):
            ax.bar(range(len(df)), df[m], 0.7, color=colors)
            if len(base):
                ax.axhline(float(df.loc[base[0], m]), color="0.4", ls="--", lw=0.8,
                           label=f"PyTorch's default ({labels[base[0]]})")
            ref = (paper[(paper["model"] == model) & (paper["metric"] == name)] if paper is not None
                   else pd.DataFrame(columns=["choice", "value"]))
            ref = ref[ref["choice"].astype(str).isin(set(labels))]
            if len(ref):
                at = str(ref.loc[ref["value"].idxmax(), "choice"])
                scale = float(df.loc[labels == at, m].iloc[0])
                for _, r in ref.iterrows():
                    j = int(df.index[labels == str(r["choice"])][0])
                    ax.plot(j, r["value"] * scale, "_", color="black", ms=14, mew=2, zorder=3)
                ax.plot([], [], "_", color="black", ms=12, mew=2, label=f"Swan Fig. 2, scaled to ours at {at}")
            ax.set_xticks(range(len(df)))
            ax.set_xticklabels(labels, rotation=90, fontsize=7)
            ax.set_ylabel(axis)
            ax.set_title(f"{model}: {name}", fontsize=9)
            ax.set_ylim(0, ax.get_ylim()[1] * 1.25)   # room for the legend above the bars
            ax.legend(fontsize=7, loc="upper left")
        row[1].set_xlabel("execution choice (cpu ids; grey: PyTorch's default, unpinned, threads = big cores)",
                          fontsize=8)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def read_paper_fig2(path: Path) -> pd.DataFrame:
    """The paper's Fig. 2 transcription with choices as strings ("0123" stays "0123")."""
    return pd.read_csv(path, comment="#", dtype={"choice": str})


# -- thermal ------------------------------------------------------------------------------------


def thermal_run(df: pd.DataFrame, path: Path, title: str, sensor: str,
                engine_thresholds_c: Sequence[float] = ()) -> Path:
    """Temperatures; the cap in force per cluster with each party's limit where it binds; the
    skin temperature against the engine's thresholds; throughput - all against time."""
    plt = _plt()
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    t = df["time_s"] / 60.0
    for node in dict.fromkeys((sensor, "soc", "battery", "skin")):
        col = f"temp_{node}_c"
        if col in df:
            axes[0].plot(t, df[col], lw=1.2 if node in ("skin", "battery") else 1,
                         ls="--" if node == "battery" else "-", label=node)
    axes[0].axhline(35.0, color="grey", ls=":", lw=0.8, label="35 C (Swan's battery limit)")
    axes[0].set_ylabel("temperature (C)")
    for name in (c[4:-4] for c in df.columns if c.startswith("cap_")):
        fmax = df[f"cap_{name}_mhz"].max()
        # the cap in force as a wide pale band; each party's limit a thin line on it where it binds
        line, = axes[1].step(t, df[f"cap_{name}_mhz"], where="post", lw=5, alpha=0.3,
                             label=f"{name}: cap in force (the lower limit)")
        for party, ls in (("kernel", ":"), ("engine", "--")):
            col = f"limit_{party}_{name}_mhz"
            if col in df:
                # drawn only where that party's limit is below f_max, so no line hides under another
                binding = df[col].where(df[col] < fmax)
                if binding.notna().any():
                    axes[1].step(t, binding, where="post", lw=1.2, ls=ls, color=line.get_color(),
                                 label=f"{name}: {'kernel zone' if party == 'kernel' else 'thermal engine'} limit")
    axes[1].set_ylabel("frequency cap (MHz)")
    axes[2].plot(t, df["temp_skin_c"], lw=1.2, color="C3", label="skin")
    for i, th in enumerate(sorted(set(engine_thresholds_c))):
        axes[2].axhline(th, color="grey", ls=":", lw=0.7, label="engine thresholds" if i == 0 else None)
    axes[2].set_ylabel("skin temperature (C)")
    axes[3].plot(t, df["gflops"], lw=1)
    axes[3].set_ylabel("throughput (GFLOP/s)")
    axes[3].set_xlabel("time (min)")
    axes[3].set_ylim(0, max(float(df["gflops"].max()), 1e-9) * 1.1)
    for ax in axes[:3]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.suptitle(title)
    fig.subplots_adjust(right=0.72)
    return _save(fig, path, dpi=100)


def thermal_summary(timelines: dict[tuple[str, str], pd.DataFrame], loads: Sequence[str], path: Path) -> Path:
    """Throughput relative to the first 10 s, every device, one panel per load; each device its
    own line style and width, so devices whose curves coincide stay visible."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(loads), figsize=(12, 4), sharey=True, squeeze=False)
    styles = ("-", "--", "-.", ":")
    for ax, load in zip(axes[0], loads):
        k = 0
        for (name, ld), df in timelines.items():
            if ld != load:
                continue
            start = df.loc[df["time_s"] <= 10.0, "gflops"].mean()
            ax.plot(df["time_s"] / 60.0, df["gflops"] / start, ls=styles[k % len(styles)],
                    lw=2.4 - 0.3 * (k % 5), label=name)
            k += 1
        ax.set_title(f"dense FP32 on the {load} cores")
        ax.set_xlabel("time (min)")
    axes[0, 0].set_ylabel("throughput / first 10 s (ratio)")
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path, dpi=100)


# -- user experience ----------------------------------------------------------------------------


def ux_drops(drops: pd.DataFrame, path: Path,
             title: str = "Work-like score drop, training in the background") -> Path:
    """Mean Work-like drop per phone and background, its range over the seeds as an error bar,
    the paper's Fig. 3 drops as black lines."""
    plt = _plt()
    df = drops[drops["placement"] != "none"].copy()
    df["run"] = df["model"] + " " + df["placement"]
    runs = list(dict.fromkeys(df["run"]))
    devices = list(dict.fromkeys(df["device"]))
    width = 0.8 / max(len(runs), 1)
    fig, ax = plt.subplots(figsize=(max(5.0, 2.2 + 1.6 * len(devices)), 4))
    for j, run in enumerate(runs):
        sub = df[df["run"] == run].set_index("device").reindex(devices)
        xs = [i + (j - (len(runs) - 1) / 2) * width for i in range(len(devices))]
        err = [sub["drop_pct"] - sub["drop_min_pct"], sub["drop_max_pct"] - sub["drop_pct"]]
        ax.bar(xs, sub["drop_pct"], width, label=run, yerr=err if (sub["seeds"] > 1).any() else None,
               capsize=2)
        for x, p in zip(xs, sub["paper_drop_pct"]):
            if pd.notna(p):
                ax.plot([x - width / 2, x + width / 2], [p, p], color="black", lw=2)
    if df["paper_drop_pct"].notna().any():
        ax.plot([], [], color="black", lw=2, label="Swan paper Fig. 3")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xticks(range(len(devices)), devices)
    ax.set_ylabel("Work-like score drop (%)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # off the bars and the zero line
    return _save(fig, path, dpi=120)


def ux_jank(janks: pd.DataFrame, path: Path) -> Path:
    """Share of janky frames per phone, light app and background."""
    _plt()  # the Agg backend, before pandas draws
    df = janks.copy()
    df["run"] = [("none" if p == "none" else f"{m} {p}") for m, p in zip(df["model"], df["placement"])]
    df["x"] = df["device"] + "\n" + df["app"]
    piv = df.pivot_table(index="x", columns="run", values="jank_pct", sort=False)
    ax = piv.plot.bar(figsize=(max(6, 1.1 * len(piv) + 2), 4.5), rot=60)
    ax.tick_params(axis="x", labelsize=7)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("janky frames (%)")
    ax.set_xlabel("")
    ax.set_title("Light apps: frames missing their deadline")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(ax.figure, path, dpi=120)


# -- policies -----------------------------------------------------------------------------------


def policy_gains(df: pd.DataFrame, path: Path, policies: Sequence[str] = ("swan", "swan-layer"),
                 title: str = "") -> Path:
    """Speedup and energy gain of each policy over the baseline, per device and model.

    ``df``: one row per device, model and policy with ``speedup`` and ``energy_gain`` (the
    baseline's per-batch figure over the policy's)."""
    plt = _plt()
    df = df[df["policy"].isin(policies)].copy()
    df["x"] = df["device"] + "\n" + df["model"].str.replace("_v2_x2_0", "").str.replace("_v2", "v2")
    xs = list(dict.fromkeys(df["x"]))
    fig, axes = plt.subplots(2, 1, figsize=(max(7.0, 0.8 * len(xs) + 2), 6.5), sharex=True)
    width = 0.8 / max(len(policies), 1)
    for ax, col, label in zip(axes, ("speedup", "energy_gain"), ("speedup (x)", "energy gain (x)")):
        for j, pol in enumerate(policies):
            sub = df[df["policy"] == pol].set_index("x").reindex(xs)
            pos = [i + (j - (len(policies) - 1) / 2) * width for i in range(len(xs))]
            ax.bar(pos, sub[col], width, label=pol)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    axes[-1].set_xticks(range(len(xs)), xs, fontsize=7)
    axes[-1].set_xlabel("device and model")
    axes[0].set_title(title or "over pytorch-default, per batch at steady state on an idle phone")
    return _save(fig, path, dpi=120)


def policy_ux(df: pd.DataFrame, path: Path) -> Path:
    """Work-like score drop (%) per policy, per device and model (positive: the owner loses)."""
    _plt()   # the Agg backend, before pandas draws
    df = df.copy()
    df["x"] = df["device"] + "\n" + df["model"]
    piv = df.pivot_table(index="x", columns="policy", values="ux_score_drop_pct", sort=False)
    piv = piv[[p for p in dict.fromkeys(df["policy"]) if p in piv.columns]]
    ax = piv.plot.bar(figsize=(max(6.0, 1.3 * len(piv) + 2), 4), rot=0, width=0.8)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_ylabel("Work-like score drop (%)")
    ax.set_xlabel("device and model")
    ax.tick_params(axis="x", labelsize=7)
    ax.set_title("The owner's Work-like score with training in the background")
    ax.legend(fontsize=7, ncol=2)
    return _save(ax.figure, path, dpi=120)


def adaptation_timeline(batches: pd.DataFrame, decisions: pd.DataFrame, path: Path,
                        sessions: Sequence[tuple[float, float, str]] = (), title: str = "") -> Path:
    """Batch latency over time, one colour per plan (crosses: exploration batches), the owner's
    sessions shaded, the policy's steps marked. Plan labels are strings ("0123")."""
    plt = _plt()
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(11, 4))
    for start, end, name in sessions:
        ax.axvspan(start, end, color="orange", alpha=0.2, lw=0)
        ax.text(start, 1.0, f" {name}", transform=ax.get_xaxis_transform(), va="top", fontsize=8)
    colours = plt.get_cmap("tab10")
    for k, (plan, g) in enumerate(batches.groupby("plan", sort=False)):
        explore = (g["purpose"] == "explore").to_numpy()
        for sel, marker, note in ((~explore, "o", ""), (explore, "x", " (exploring)")):
            if sel.any():
                ax.scatter(g["start_s"][sel], g["latency_s"][sel], s=10, marker=marker, color=colours(k % 10),
                           label=f"{plan}{note}")
    styles = {"step_down": ("v", "red"), "step_up": ("^", "green"), "select": ("*", "black")}
    top = batches["latency_s"].max() if len(batches) else 1.0
    for kind, (marker, colour) in styles.items():
        d = decisions[decisions["kind"] == kind]
        if len(d):
            ax.scatter(d["time_s"], [top * 1.3] * len(d), marker=marker, color=colour, s=40, label=kind)
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("batch latency (s)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title)
    return _save(fig, path, dpi=120)


# -- the fleet ----------------------------------------------------------------------------------


def fleet_curves(rounds: dict[str, pd.DataFrame], summaries: dict[str, pd.DataFrame], path: Path,
                 target_accuracy: float | None = None) -> Path:
    """Per task (one column each): test accuracy against simulated hours per policy; time and
    energy to the target accuracy as bars with each policy's ratio to the baseline written on
    them; clients online against time where that number moves (else a line of text says it
    held). ``rounds``/``summaries``: task -> the fleet's rounds and summary tables. The title
    names the learner: the task sets only what the phones' training costs."""
    plt = _plt()
    n = len(rounds)
    fig, axes = plt.subplots(4, n, figsize=(4.6 * n + 1.2, 11), squeeze=False)
    styles = ("-", "--", "-.", ":")
    for j, (task, df) in enumerate(rounds.items()):
        summary = summaries[task].set_index("policy")
        policies = list(dict.fromkeys(df["policy"]))
        online = df["clients_online"]
        for k, policy in enumerate(policies):
            g = df[df["policy"] == policy]
            # distinct styles and widths: lines that coincide stay visible
            kw = dict(ls=styles[k % len(styles)], lw=max(0.8, 2.2 - 0.6 * k), color=f"C{k}", label=policy)
            axes[0, j].plot(g["time_h"], g["accuracy"], **kw)
            if online.nunique() > 1:
                axes[3, j].plot(g["time_h"], g["clients_online"], **kw)
        if target_accuracy is not None:
            axes[0, j].axhline(target_accuracy, color="grey", ls=":", lw=0.8, label=f"target {target_accuracy:g}")
        axes[0, j].set_title(task, fontsize=9)
        axes[0, j].set_xlabel("simulated time (h)")
        axes[0, j].set_ylabel("test accuracy (fraction)")
        axes[0, j].legend(fontsize=7, loc="lower right")
        for ax, col, scale, unit, ratio in ((axes[1, j], "time_to_target_h", 1.0, "time to target (h)", "speedup"),
                                            (axes[2, j], "energy_to_target_j", 1e-3, "energy to target (kJ)",
                                             "energy_efficiency")):
            vals = [summary.loc[p, col] * scale for p in policies]
            bars = ax.bar(range(len(policies)), [0.0 if pd.isna(v) else v for v in vals],
                          color=[f"C{k}" for k in range(len(policies))])
            for b, p, v in zip(bars, policies, vals):
                r = summary.loc[p, ratio]
                text = "target not reached" if pd.isna(v) else f"{v:.3g}\n({r:.2f}x {ratio.replace('_', ' ')})"
                ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                            fontsize=7)
            ax.set_xticks(range(len(policies)))
            ax.set_xticklabels(policies, fontsize=8)
            ax.set_ylabel(unit)
            ax.set_ylim(0, max([v for v in vals if not pd.isna(v)] or [1.0]) * 1.45)
        if online.nunique() > 1:
            axes[3, j].set_xlabel("simulated time (h)")
            axes[3, j].set_ylabel("clients online (count)")
            axes[3, j].set_ylim(0, online.max() * 1.08)   # a line at the fleet's size stays off the frame
            axes[3, j].legend(fontsize=7, loc="lower left")
        else:   # a flat line says nothing a sentence does not
            axes[3, j].axis("off")
            axes[3, j].text(0.5, 0.5, f"{int(online.iloc[0])} clients online throughout\n"
                            f"(nobody ran out of energy budget in {df['time_h'].max():.2g} simulated h)",
                            ha="center", va="center", fontsize=8, transform=axes[3, j].transAxes)
    fig.suptitle("The learner: FedAvg of a multinomial logistic regression on FedProx Synthetic(1, 1).\n"
                 "Each phone's local training costs (time, energy) what the named task costs on that phone.",
                 fontsize=9)
    return _save(fig, path, dpi=110)

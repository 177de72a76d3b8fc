"""The command line: catalogue listing and one-line errors for bad input."""
import subprocess
import sys

from swansim.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "swansim", *args], capture_output=True, text=True)


def test_profiles_list_shows_every_soc_and_phone(capsys):
    assert main(["profiles", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("sdm845", "sm8150", "sm8250", "sm8350", "gs101", "mt8183", "msm8998", "kirin970",
                 "sm8550", "dimensity9300", "rk3588", "pixel3", "galaxy-s10e", "galaxy-tab-s6",
                 "oneplus8", "mi10", "pixel6"):
        assert f"\n{name} " in out


def test_validate_all_profiles(capsys):
    assert main(["profiles", "validate"]) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def test_malformed_profile_is_one_line_exit_2(tmp_path):
    src = open("device_profiles/socs/sdm845.toml").read()
    # drop the big cluster's OPP table
    head, tail = src.split('name = "big"', 1)
    tail = "\n".join(l for l in tail.splitlines() if not l.startswith("opp_freq_mhz"))
    bad = tmp_path / "bad.toml"
    bad.write_text(head + 'name = "big"' + tail)
    r = run_cli("profiles", "validate", str(bad))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "bad.toml" in lines[0] and "clusters[1].opp_freq_mhz" in lines[0] and "OPP table" in lines[0]


def test_unknown_device_names_the_choices():
    r = run_cli("profiles", "show", "nokia3310")
    assert r.returncode == 2 and "unknown profile 'nokia3310'" in r.stderr and "pixel3" in r.stderr

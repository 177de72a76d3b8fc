"""The README says no more than the project can show: its closeness table is the ledger's, and
its quick Python example prints what the README quotes."""
from pathlib import Path


from swansim.dnn.calibrate import closeness_markdown, read_ledger, readme_block

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_closeness_table_is_the_ledgers():
    assert readme_block(README.read_text()) == closeness_markdown(read_ledger())


def test_the_compare_example_prints_what_the_readme_quotes():
    import swansim

    df = swansim.compare(["pixel3"], ["shufflenet_v2_x2_0"], ["oracle", "pytorch-default"], duration_s=60,
                         sets={"soc.dram_bandwidth_gbps": [8, 29.9]}, ux=False, jobs=1)
    text = README.read_text()
    for row in df.itertuples():
        assert f"{row.latency_s:.6f}" in text and f"{row.energy_j:.6f}" in text

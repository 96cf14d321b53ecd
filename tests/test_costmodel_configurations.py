"""helpers.costmodel.configurations: every machine predicted for is one that can be bought or rented."""

from fractions import Fraction

import pytest

from helpers.costmodel import configurations, money, recommend, specs
from helpers.costmodel.seed import seed_check


def test_the_table_is_consistent_with_the_gpu_link_and_price_tables():
    configurations.validate_tables()
    for config in configurations.CONFIGURATIONS:
        assert config.gpu in specs.GPUS and config.price_row["gpu"] == config.gpu
    for row in money.PRICES:
        assert row["gpu"] in specs.GPUS  # every price buys a GPU the roofline knows


def test_only_pairs_that_are_sold():
    pairs = configurations.pairs()
    assert ("H100 SXM 80 GB", "NVLink 4 (H100 SXM)") in pairs
    assert not any(gpu == "H100 SXM 80 GB" and link and link.startswith("PCIe") for gpu, link in pairs)
    assert not any(gpu == "GTX 1080 Ti" and link and link.startswith("NVLink") for gpu, link in pairs)
    assert {link for gpu, link in pairs if gpu == "V100 SXM2 16 GB"} == {None, "NVLink 2 (V100 SXM2)"}
    assert {link for gpu, link in pairs if gpu in ("L4", "L40S")} == {None, "PCIe 4.0 x16"}
    with pytest.raises(ValueError, match="is not a configuration that can be bought or rented"):
        configurations.check_real("H100 SXM 80 GB", "PCIe 4.0 x16")
    with pytest.raises(ValueError, match="not a configuration that exists"):
        configurations.configuration("half of an AWS p4de.24xlarge")


def test_every_prediction_of_the_chapter_is_a_real_configuration_with_its_price():
    check = seed_check(("ConvNet",))
    everything = recommend.scenario_predictions(("ConvNet",), batches=(100,))
    for frame in (check, everything):
        for machine, gpu, link in frame[["machine", "gpu", "link"]].drop_duplicates().itertuples(index=False):
            config = configurations.configuration(machine)
            link = link if isinstance(link, str) else None  # pandas keeps a missing link as NaN
            assert (gpu, link) == (config.gpu, config.link)
            configurations.check_real(gpu, link, config.offer)
    assert set(everything["machine"]) == set(configurations.BY_NAME)


def test_prices_and_baselines():
    p5 = configurations.configuration("AWS p5.48xlarge")
    assert p5.hourly_price == Fraction("55.04") and p5.gpus == 8
    assert configurations.baseline(p5).name == "AWS p5.4xlarge"
    assert configurations.configuration("AWS g6.12xlarge").hourly_price == Fraction("4.6016")
    assert configurations.baseline(configurations.configuration("AWS p4de.24xlarge")) is None
    seed = configurations.configuration(configurations.SEED_WORKSTATION)
    assert seed.hourly_price is None and seed.price_row["dollars"] == "699"  # bought, not rented


def test_a_table_that_pairs_an_offer_with_the_wrong_gpu_is_refused(monkeypatch):
    wrong = configurations.Configuration("AWS p5.48xlarge", "L4", 8, "PCIe 4.0 x16", "AWS p5.48xlarge")
    monkeypatch.setattr(configurations, "CONFIGURATIONS", (wrong,))
    with pytest.raises(ValueError, match="not one price row for L4"):
        configurations.validate_tables()

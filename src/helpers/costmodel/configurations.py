"""The machines chapter 5 predicts for: only ones that can be bought or rented (chapter 5).

A configuration is a GPU model with the link it is sold with, in the number an offer gives, named as its
vendor names it and priced by one row of ``money.PRICES`` (or, for a machine that was bought, by the row
of its cards). An H100 SXM only comes on an NVLink baseboard, a GeForce card never has NVLink, an AWS p3
joins its V100s by NVLink rather than a PCIe host bridge: each pair below is one that a renter can get.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import pandas as pd

from helpers.costmodel.money import PRICES, exact, price_source
from helpers.costmodel.specs import GPUS, LINKS


@dataclass(frozen=True)
class Configuration:
    """``gpus`` of ``gpu`` joined by ``link`` (None for one GPU), sold as ``offer`` (a ``PRICES`` row)."""

    name: str
    gpu: str
    gpus: int
    link: str | None
    offer: str
    note: str = ""

    @property
    def price_row(self) -> dict:
        return next(row for row in PRICES if row["offer"] == self.offer)

    @property
    def hourly_price(self) -> Fraction | None:
        """Dollars per hour of the whole machine; None for a machine that is bought, not rented."""
        row = self.price_row
        return exact(row["dollars"]) if row["per"] == "hour" else None


SEED_WORKSTATION = "the seed's 4x GTX 1080 Ti workstation"
CONFIGURATIONS = (
    Configuration(SEED_WORKSTATION, "GTX 1080 Ti", 4, "PCIe 3.0 x16, host bridge",
                  "GTX 1080 Ti, launch price",
                  "bought, not rented: the seed's own machine; GeForce cards meet at the CPU's host bridge"),
    Configuration("AWS p3.2xlarge", "V100 SXM2 16 GB", 1, None, "AWS p3.2xlarge"),
    Configuration("AWS p3.8xlarge", "V100 SXM2 16 GB", 4, "NVLink 2 (V100 SXM2)", "AWS p3.8xlarge"),
    Configuration("AWS p3.16xlarge", "V100 SXM2 16 GB", 8, "NVLink 2 (V100 SXM2)", "AWS p3.16xlarge",
                  "hybrid cube-mesh NVLink, not a switch"),
    Configuration("AWS p4d.24xlarge", "A100 SXM 40 GB", 8, "NVLink 3 (A100 SXM)", "AWS p4d.24xlarge",
                  "NVSwitch; no one-GPU A100 instance on AWS"),
    Configuration("AWS p4de.24xlarge", "A100 SXM 80 GB", 8, "NVLink 3 (A100 SXM)", "AWS p4de.24xlarge",
                  "NVSwitch; no one-GPU A100 instance on AWS"),
    Configuration("AWS p5.4xlarge", "H100 SXM 80 GB", 1, None, "AWS p5.4xlarge"),
    Configuration("AWS p5.48xlarge", "H100 SXM 80 GB", 8, "NVLink 4 (H100 SXM)", "AWS p5.48xlarge",
                  "NVSwitch"),
    Configuration("AWS p5en.48xlarge", "H200 SXM 141 GB", 8, "NVLink 4 (H200 SXM)", "AWS p5en.48xlarge",
                  "NVSwitch; no one-GPU H200 instance on AWS"),
    Configuration("AWS g6.xlarge", "L4", 1, None, "AWS g6.xlarge"),
    Configuration("AWS g6.12xlarge", "L4", 4, "PCIe 4.0 x16", "AWS g6.12xlarge", "no NVLink on L4"),
    Configuration("AWS g6.48xlarge", "L4", 8, "PCIe 4.0 x16", "AWS g6.48xlarge", "no NVLink on L4"),
    Configuration("AWS g6e.xlarge", "L40S", 1, None, "AWS g6e.xlarge"),
    Configuration("AWS g6e.12xlarge", "L40S", 4, "PCIe 4.0 x16", "AWS g6e.12xlarge", "no NVLink on L40S"),
    Configuration("AWS g6e.48xlarge", "L40S", 8, "PCIe 4.0 x16", "AWS g6e.48xlarge", "no NVLink on L40S"),
)  # fmt: skip
BY_NAME = {configuration.name: configuration for configuration in CONFIGURATIONS}


def configuration(name: str) -> Configuration:
    """The configuration called ``name``; a ValueError listing the real ones otherwise."""
    if name not in BY_NAME:
        raise ValueError(f"{name!r} is not a configuration that exists here; choose one of {list(BY_NAME)}")
    return BY_NAME[name]


def baseline(config: Configuration) -> Configuration | None:
    """The one-GPU offer of the same GPU, against which ``config``'s speed-up and price are compared;
    None where no one sells a single GPU of that kind (the speed-up is then against one of its own GPUs)."""
    return next((c for c in CONFIGURATIONS if c.gpu == config.gpu and c.gpus == 1), None)


def pairs() -> set[tuple[str, str | None]]:
    """Every (GPU, link) pair that exists in the table."""
    return {(c.gpu, c.link) for c in CONFIGURATIONS}


def check_real(gpu: str, link: str | None, offer: str | None = None) -> None:
    """ValueError unless ``gpu`` on ``link`` (and, if given, sold as ``offer``) is in the table."""
    found = [c for c in CONFIGURATIONS if (c.gpu, c.link) == (gpu, link) and offer in (None, c.offer)]
    if not found:
        raise ValueError(
            f"{gpu} on {link} (offer {offer}) is not a configuration that can be bought or rented"
        )


def configuration_table() -> pd.DataFrame:
    """The table as the chapter shows it: machine, GPU, count, link, price and its source and date."""
    rows = []
    for c in CONFIGURATIONS:
        row = c.price_row
        price = f"${float(exact(row['dollars'])):,.2f} per {row['per']}"
        price += "" if row["per"] == "hour" else " (bought)"
        rows.append({"machine": c.name, "GPU": c.gpu, "GPUs": c.gpus, "link": c.link or "(one GPU)",
                     "price": price, "price source": price_source(row),
                     "note": c.note})  # fmt: skip
    return pd.DataFrame(rows)


def validate_tables() -> None:
    """ValueError naming the first configuration whose GPU, link or offer is missing from its table, or
    whose offer sells another GPU or another number of GPUs."""
    for c in CONFIGURATIONS:
        if c.gpu not in GPUS or (c.link is not None and c.link not in LINKS):
            raise ValueError(f"{c.name}: {c.gpu} or {c.link} is not in the GPU and link tables")
        if (c.link is None) != (c.gpus == 1):
            raise ValueError(f"{c.name}: {c.gpus} GPUs need a link, and one GPU none")
        rows = [row for row in PRICES if row["offer"] == c.offer]
        if len(rows) != 1 or rows[0]["gpu"] != c.gpu:
            raise ValueError(f"{c.name}: its offer {c.offer!r} is not one price row for {c.gpu}")
        if rows[0]["per"] == "hour" and rows[0]["gpus"] != c.gpus:
            raise ValueError(f"{c.name}: the offer rents {rows[0]['gpus']} GPUs, not {c.gpus}")


def gpus_in_use(extra=()) -> list[str]:
    """The GPUs of the configurations, in table order, and any of ``extra`` (GPUs the study measured, which
    a roofline is checked against) after them: the only GPUs chapter 5 predicts for."""
    found = dict.fromkeys(c.gpu for c in CONFIGURATIONS)
    found.update(dict.fromkeys(gpu for gpu in extra if gpu in GPUS))
    return list(found)

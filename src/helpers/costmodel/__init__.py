"""The cost model of chapter 5, one module per part.

- ``money``: rent-or-buy break-even, Table I and dollars per result, in exact arithmetic;
- ``lossfit``: the Optimus loss curve, fitted and tested on held-out curve ends;
- ``timemodel``: seconds per step from compute and communication, calibrated and validated;
- ``recommend``: predicted speed-up and dollars for 1–8 GPUs over named links.
"""

"""The cost model of chapter 5, one module per part.

- ``money``: rent-or-buy break-even, Table I and dollars per result, in exact arithmetic;
- ``lossfit``: the Optimus loss curve, fitted and tested on held-out curve ends;
- ``timemodel``: seconds per step from compute and communication, calibrated and validated;
- ``gpus``: FLOPs and bytes per layer, the roofline with its uncertain inputs, GPU and link specs;
- ``configurations``: the machines that can be bought or rented, each with its price row;
- ``recommend``: predicted speed-ups and dollars on those machines, each a band, with verdicts;
- ``rule``: the two conditions on the per-GPU batch (hiding the all-reduce, outgrowing the fixed cost);
- ``validation``: the time model against multi-rank runs it never saw, per method;
- ``seed``: the check against the seed's arithmetic and verdicts;
- ``tables``, ``prose`` and ``rule_prose``: what the chapter shows, as tables with human columns and as
  sentences.
"""

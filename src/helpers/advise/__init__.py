"""Will more GPUs help *your* model? The book's cost model applied to any PyTorch model (chapter 7).

- ``counting``: the model counted exactly (parameters, bytes, FLOPs and host ops per layer);
- ``predict``: what each machine that can be rented would do with it, each figure a band, with verdicts;
- ``measure``: this machine's own step times and all-reduce, in place of assumptions (``--measure``);
- ``validate``: real DDP launches here, against the prediction (``--validate K``);
- ``report``: the terminal table, the JSON with every number's source, the figure;
- ``held_out``: chapter 7's test on models the time model never saw, in words;
- ``examples``: two models chapter 7 tests the advice on, which the time model never saw.

``python -m helpers.advise MODEL --input-shape ... --batch ...`` runs it (``helpers.advise.__main__``).
It adds no physics of its own: the roofline, the time model and the sharding arithmetic are chapter 5's
and chapter 6's.
"""

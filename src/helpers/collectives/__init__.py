"""Collective operations (chapter 4), one module per role.

- ``model``: what each collective leaves on each rank, the α-β cost formulas and their fit, bus
  bandwidth factors, bytes per step by topology (pure arithmetic; chapter 5 imports it);
- ``p2p``: ring broadcast, ring all-reduce and a parameter server from send/recv, as lock-step schedules;
- ``tasks``: the torchrun worker (one process per rank) and its tasks;
- ``runs``: the parent side: launching tasks through the results store, their records as frames, the
  α-β fits and what they predict;
- ``tables``: the chapter's tables and the sentences that quote them;
- ``link_reading``: what the fitted link shows, in words, from the records of the machine that measured;
- ``staleness``: asynchronous SGD simulated in one process, and steps to a target loss per staleness.
"""

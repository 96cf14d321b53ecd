"""Memory sharding (chapter 6), one module per role.

- ``memory``: the bytes each device holds under DDP and ZeRO stages 1–3 (exact, from the models'
  parameters and chapter 1's activations), and what fits on a named GPU;
- ``tasks``: the torchrun worker that trains with ZeRO-1 (``ZeroRedundancyOptimizer``) or FSDP
  (``fully_shard``), reads each rank's shard sizes and counts every collective's bytes;
- ``runs``: the parent side: launching it through the results store, and the traffic of each stage,
  counted and priced.
"""

"""torchrun as ``helpers.launch`` starts it: ``python -m helpers.torchrun ARGS`` is
``python -m torch.distributed.run ARGS``, ended at once after a launch that succeeded.

torchrun's ``main`` returns once this node's ranks have all exited with status 0 and its exit barrier
has passed (or timed out: torch swallows that), its ranks' log files closed; what is left is Python's
teardown, skipped here (``processes.end_process``). A failure raises out of ``main`` as in torchrun
itself, with its exit status and error report. As with torchrun itself, a peer node's agent still closing
the rendezvous after this one is gone may log a connection warning; its exit status is unaffected.
"""

from torch.distributed.run import main

from helpers.processes import end_process

if __name__ == "__main__":
    main()
    end_process()

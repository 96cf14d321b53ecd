"""Collectives built from point-to-point messages only: ring broadcast, ring all-reduce, parameter server.

Each algorithm is first a *schedule*: for every rank, a list of steps, each naming the chunks it sends
to and receives from which peers. ``run_schedule`` executes a rank's steps, posting each step's sends
and receives together with ``dist.batch_isend_irecv`` and waiting for all of them before the next step.
One pattern serves every ring and chain, for two reasons:

- NCCL: a send or receive posted on its own runs on a two-rank communicator that NCCL creates on first
  use, and creating it blocks until both peers arrive. Posting "receive from the left" and then "send
  to the right" one at a time therefore makes each of three or more ranks wait for its left neighbour,
  which waits for its own: a cycle, a hang. Batched operations reuse the process group's communicator
  (created eagerly by ``helpers.worker.process_group``), and a step's send and receive are in flight
  together.
- Any backend: a step can complete only when its peers post the matching messages. If in every step
  each send meets a receive from its peer *in the same step* (``unmatched_messages`` finds none), every
  rank finishes step i once all have finished step i−1: no schedule of this module can deadlock.

Gloo's send and receive move host memory only, so with Gloo a CUDA tensor travels through a host copy,
as Gloo's own collectives do with CUDA tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Step:
    """One step of one rank: the (peer, chunk) pairs it sends and receives, posted together.

    With ``add`` the received chunks are summed into place (a reduction), else written over it.
    """

    sends: tuple[tuple[int, int], ...] = ()
    receives: tuple[tuple[int, int], ...] = ()
    add: bool = False


def ring_all_reduce_schedule(rank: int, world_size: int) -> list[Step]:
    """Reduce-scatter then all-gather around the ring r → r+1, on k chunks.

    In reduce-scatter step s rank r sends chunk r−s to its right neighbour and adds chunk r−s−1 from
    its left one; after k−1 steps it holds the full sum of chunk r+1, and in k−1 all-gather steps the
    finished chunks travel on. Every rank sends 2(k−1) messages of N/k bytes.
    """
    k = world_size
    left, right = (rank - 1) % k, (rank + 1) % k
    reduce_scatter = [
        Step(sends=((right, (rank - s) % k),), receives=((left, (rank - s - 1) % k),), add=True)
        for s in range(k - 1)
    ]
    all_gather = [
        Step(sends=((right, (rank + 1 - s) % k),), receives=((left, (rank - s) % k),)) for s in range(k - 1)
    ]
    return reduce_scatter + all_gather


def ring_broadcast_schedule(rank: int, world_size: int, src: int, chunks: int) -> list[Step]:
    """The root's tensor around the ring src → src+1 → … in ``chunks`` pieces, pipelined.

    In step t the rank at distance p from the root forwards piece t−p and receives piece t−p+1, so
    after S+k−2 steps the last rank has all S pieces: (S+k−2)(α + Nβ/S). S = 1 is the naive ring,
    where the whole tensor hops rank to rank, (k−1)(α + Nβ).
    """
    k = world_size
    position = (rank - src) % k
    left, right = (rank - 1) % k, (rank + 1) % k
    steps = []
    for t in range(chunks + k - 2):
        sent, received = t - position, t - position + 1
        sends = ((right, sent),) if position < k - 1 and 0 <= sent < chunks else ()
        receives = ((left, received),) if position > 0 and 0 <= received < chunks else ()
        steps.append(Step(sends=sends, receives=receives))
    return steps


def parameter_server_schedule(rank: int, world_size: int, server: int) -> list[Step]:
    """Every worker sends its tensor (one chunk) to the server, which sums and sends the result back.

    The server's link carries (k−1)N in and (k−1)N out, a worker's N each way.
    """
    workers = tuple(worker for worker in range(world_size) if worker != server)
    if rank == server:
        return [
            Step(receives=tuple((w, 0) for w in workers), add=True),
            Step(sends=tuple((w, 0) for w in workers)),
        ]
    return [Step(sends=((server, 0),)), Step(receives=((server, 0),))]


def unmatched_messages(schedules: list[list[Step]]) -> list[str]:
    """Every message of ``schedules`` (one per rank) that its peer does not post in the same step.

    Empty means lock-step: each send of rank r to p in step i meets a receive of p from r in step i,
    and each receive a send, with the same chunk, so no step waits for a later one.
    """
    problems = []
    for rank, steps in enumerate(schedules):
        for index, step in enumerate(steps):
            for kind, mine, theirs in (("send", step.sends, "receives"), ("receive", step.receives, "sends")):
                for peer, chunk in mine:
                    peer_steps = schedules[peer] if 0 <= peer < len(schedules) else []
                    partner = getattr(peer_steps[index], theirs) if index < len(peer_steps) else ()
                    if (rank, chunk) not in partner:
                        problems.append(
                            f"step {index}: rank {rank}'s {kind} of chunk {chunk} with rank {peer}"
                        )
    return problems


_RECEIVE_BUFFERS: dict[tuple, torch.Tensor] = {}


def receive_buffer(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A scratch vector of ``numel`` elements, reused across calls (kept until the process ends).

    Fresh large CPU tensors cost page faults on first touch: allocating the receive buffer on every
    all-reduce made 64 MiB rings ~20 % slower on a 2-core CPU.
    """
    key = (dtype, torch.device(device))
    if key not in _RECEIVE_BUFFERS or _RECEIVE_BUFFERS[key].numel() < numel:
        _RECEIVE_BUFFERS[key] = torch.empty(numel, dtype=dtype, device=device)
    return _RECEIVE_BUFFERS[key][:numel]


def run_schedule(steps: list[Step], chunks: list[torch.Tensor]) -> None:
    """Execute one rank's ``steps`` on ``chunks`` (views of one tensor), step by step.

    A step's receives and sends go out in one ``dist.batch_isend_irecv``; empty chunks (more ranks or
    pieces than elements) travel not at all, on both sides alike. Summed receives land in a reused
    scratch buffer and are added once the step's messages have all arrived.
    """
    for step in steps:
        operations, additions = [], []
        if step.add:
            scratch = receive_buffer(
                sum(chunks[c].numel() for _, c in step.receives), chunks[0].dtype, chunks[0].device
            )
        offset = 0
        for peer, chunk in step.receives:
            target = chunks[chunk]
            if not target.numel():
                continue
            if step.add:
                landing = scratch[offset : offset + target.numel()]
                offset += target.numel()
                additions.append((target, landing))
                target = landing
            operations.append(dist.P2POp(dist.irecv, target, peer))
        operations += [dist.P2POp(dist.isend, chunks[c], peer) for peer, c in step.sends if chunks[c].numel()]
        if operations:
            for work in dist.batch_isend_irecv(operations):
                work.wait()
        for target, landing in additions:
            target.add_(landing)


def _flat_view(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as one contiguous vector: a view when possible, else a copy."""
    return tensor.view(-1) if tensor.is_contiguous() else tensor.reshape(-1).clone()


def _write_back(tensor: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """Copy ``flat`` into ``tensor`` when ``flat`` is a copy rather than a view of it."""
    if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
        tensor.copy_(flat.view(tensor.shape))
    return tensor


def _staged_through_host(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` must travel through a host copy: Gloo's send/recv read raw host memory only."""
    return tensor.device.type != "cpu" and dist.get_backend() == "gloo"


def _in_place(tensor: torch.Tensor, pieces: int, schedule: list[Step]) -> torch.Tensor:
    """Run ``schedule`` on ``tensor`` cut into ``pieces`` (``torch.tensor_split``), in place."""
    if _staged_through_host(tensor):
        return tensor.copy_(_in_place(tensor.cpu(), pieces, schedule))
    flat = _flat_view(tensor)
    run_schedule(schedule, list(flat.tensor_split(pieces)))
    return _write_back(tensor, flat)


def ring_all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place: ``ring_all_reduce_schedule`` on k chunks (uneven when k
    does not divide it, as ``torch.tensor_split`` cuts)."""
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1:
        return tensor
    return _in_place(tensor, k, ring_all_reduce_schedule(rank, k))


def ring_broadcast(tensor: torch.Tensor, src: int = 0, chunks: int = 1) -> torch.Tensor:
    """Broadcast ``tensor`` from ``src`` in place: ``ring_broadcast_schedule`` in ``chunks`` pieces."""
    if not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be a positive integer, not {chunks!r}")
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1:
        return tensor
    return _in_place(tensor, chunks, ring_broadcast_schedule(rank, k, src, chunks))


def parameter_server_step(tensor: torch.Tensor, server: int = 0) -> torch.Tensor:
    """Sum ``tensor`` over all ranks in place through one ``server`` rank: ``parameter_server_schedule``."""
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1 or tensor.numel() == 0:
        return tensor
    return _in_place(tensor, 1, parameter_server_schedule(rank, k, server))


def one_message_at_a_time_schedule(rank: int, world_size: int) -> list[Step]:
    """The naive ring's step posted the way the first version of this module did: receive from the left
    as one step, then send to the right as the next. It is here to fail ``unmatched_messages``: under
    NCCL, where a message blocks until its peer joins, each rank would wait for its left neighbour."""
    k = world_size
    left, right = (rank - 1) % k, (rank + 1) % k
    return [Step(receives=((left, 0),)), Step(sends=((right, 0),))]


SCHEDULES = {
    "ring all-reduce": lambda rank, k: ring_all_reduce_schedule(rank, k),
    "ring broadcast, 4 chunks": lambda rank, k: ring_broadcast_schedule(rank, k, 0, 4),
    "parameter server": lambda rank, k: parameter_server_schedule(rank, k, 0),
    "one message at a time (naive)": one_message_at_a_time_schedule,
}


def lockstep_table(world_sizes) -> list[dict]:
    """For each schedule and rank count: its steps per rank and how many messages meet no partner."""
    rows = []
    for name, schedule in SCHEDULES.items():
        for k in world_sizes:
            schedules = [schedule(rank, k) for rank in range(k)]
            rows.append({"schedule": name, "ranks": k, "steps per rank": len(schedules[0]),
                         "unmatched messages": len(unmatched_messages(schedules))})  # fmt: skip
    return rows

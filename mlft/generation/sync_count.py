"""Count, on any machine (a CPU included), what would make a GPU decode loop wait for the host or launch more
kernels: calls that read a tensor's value on the host (a device sync on CUDA), tensors built from host data or
moved between devices (a host-to-device copy), and aten ops (each one a kernel launch in eager mode).

    with SyncCounter() as c:
        model.generate(...)
    c.syncs     # Counter {"__bool__": 12, "cpu": 4, ...}
    c.ops       # aten ops dispatched

`per_step(run)` runs `run(n)` (a generation of exactly n new tokens) for two lengths and returns the counts per
extra decode step (the prompt, setup and per-batch work cancel out).

What counts as a sync (a TorchFunctionMode sees the call, whatever device the tensors are on, so a CPU run
shows what a CUDA run would do): item, tolist, bool/int/float of a tensor, cpu, numpy, nonzero / argwhere /
masked_select (their output size is data-dependent), `.to(<device>)` / `.cuda()` (a no-op when already there,
else a copy: never needed inside the loop when everything lives on one device), tensors built from Python data
(torch.tensor / as_tensor: a host-to-device copy on CUDA), and indexing with a Python list (a host-to-device
copy) or a boolean mask (a nonzero: a sync).
"""

from __future__ import annotations

from collections import Counter

SYNC_FREE = False  # True: take the accelerator's sync-free paths on a CPU too (tests and benchmarks count them)


def host_checks(t) -> bool:
    """Whether a per-token shortcut may read `t`'s values on the host (e.g. skip work no row needs): only on a
    CPU, where a read costs nothing; on an accelerator it would drain the queue at every token."""
    return t.device.type == "cpu" and not SYNC_FREE


_READS = {
    "item",
    "tolist",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "cpu",
    "numpy",
    "nonzero",
    "argwhere",
    "masked_select",
    "nonzero_static",
}
_BUILDS = {"tensor", "as_tensor", "from_numpy", "asarray"}
_MOVES = {"to", "cuda"}
_INDEX = {"__getitem__", "__setitem__", "index_put", "index_put_"}


def _is_device(x) -> bool:
    import torch

    return isinstance(x, (torch.device, str)) or (isinstance(x, int) and not isinstance(x, bool))


def _host_index(index) -> str | None:
    """'list' or 'mask' when an index makes a host-to-device copy or a data-dependent sync."""
    import torch

    parts = index if isinstance(index, tuple) else (index,)
    for p in parts:
        if isinstance(p, list):
            return "index[list]"
        if isinstance(p, torch.Tensor) and p.dtype == torch.bool:
            return "index[mask]"
    return None


def sync_kind(func, args, kwargs) -> str | None:
    """The kind of host sync / host-to-device copy a torch call makes, or None."""
    import torch

    name = getattr(func, "__name__", str(func))
    if name in _READS:
        return name
    if name in _BUILDS:
        return f"torch.{name}"
    if name == "cuda":
        return "cuda"
    if name == "to":
        targets = [*args[1:], kwargs.get("device")]
        if any(
            isinstance(t, torch.Tensor) or (t is not None and _is_device(t) and not isinstance(t, torch.dtype))
            for t in targets
        ):
            return "to(device)"
        return None
    if name in _INDEX and len(args) > 1:
        return _host_index(args[1])
    return None


class SyncCounter:
    """Context manager counting host syncs / host-to-device copies (`syncs`, by kind) and aten ops (`ops`)."""

    def __init__(self, count_ops: bool = True):
        self.syncs: Counter = Counter()
        self.ops = 0
        self.op_names: Counter = Counter()
        self.count_ops = count_ops
        self._modes: list = []

    @property
    def total(self) -> int:
        return sum(self.syncs.values())

    def __enter__(self):
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Calls(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                kind = sync_kind(func, args, kwargs)
                if kind:
                    counter.syncs[kind] += 1
                return func(*args, **kwargs)

        class _Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                counter.ops += 1
                counter.op_names[str(func.overloadpacket)] += 1
                return func(*args, **(kwargs or {}))

        self._modes = [_Calls()] + ([_Ops()] if self.count_ops else [])
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc):
        for m in reversed(self._modes):
            m.__exit__(*exc)
        self._modes = []
        return False


def per_step(run, model, short: int = 4, long: int = 12, count_ops: bool = True) -> dict:
    """{"syncs": {kind: per step}, "total": syncs per step, "ops": aten ops per step} of `model.generate` calls
    made by `run(n)` (a generation of n new tokens), at two lengths: what one more decode step costs. Counted
    only inside `model.generate` (the per-batch setup and the reading of the results stay out); divided by the
    extra forward passes. `run(short)` runs once first (caches, tables)."""
    run(short)
    counts, forwards = [], []
    original = model.generate
    for n in (short, long):
        counter, calls = SyncCounter(count_ops), [0]

        def generate(*args, _counter=counter, **kwargs):
            with _counter:
                return original(*args, **kwargs)

        handle = model.register_forward_pre_hook(lambda *a, _calls=calls: _calls.__setitem__(0, _calls[0] + 1))
        model.generate = generate
        try:
            run(n)
        finally:
            handle.remove()
            del model.generate
        counts.append(counter)
        forwards.append(calls[0])
    steps = forwards[1] - forwards[0]
    if steps <= 0:
        raise ValueError(f"per_step: {long} tokens made no more forward passes than {short}")
    kinds = set(counts[0].syncs) | set(counts[1].syncs)
    syncs = {k: (counts[1].syncs[k] - counts[0].syncs[k]) / steps for k in sorted(kinds)}
    syncs = {k: round(v, 3) for k, v in syncs.items() if v}
    op_names = {
        k: (counts[1].op_names[k] - counts[0].op_names[k]) / steps
        for k in set(counts[0].op_names) | set(counts[1].op_names)
    }
    return {
        "syncs": syncs,
        "total": round(sum(syncs.values()), 3),
        "ops": (counts[1].ops - counts[0].ops) / steps,
        "op_names": {k: v for k, v in op_names.items() if v},
        "steps": steps,
    }

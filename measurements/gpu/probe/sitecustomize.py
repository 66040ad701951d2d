"""Benchmark probe (measurements/gpu/run.sh puts this folder on PYTHONPATH): when $MLFT_BENCH_PROBE is set, every
Python process appends one JSON line there at exit -- argv, and if it imported torch whether it used CUDA and its
peak GPU memory. It shows which device a separate-process evaluation (`mlft evaluate-run`) really ran on."""

import os

if os.environ.get("MLFT_BENCH_PROBE"):
    import atexit
    import json
    import sys
    import time

    _start = time.time()

    def _report():
        rec = {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "start": _start,
            "seconds": round(time.time() - _start, 1),
            "argv": [os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:8])],
            "torch": "torch" in sys.modules,
            "omp_threads": os.environ.get("OMP_NUM_THREADS"),
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
        torch = sys.modules.get("torch")
        if torch is not None:
            try:
                used = bool(torch.cuda.is_initialized())
                rec["cuda_used"] = used
                rec["cuda_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2) if used else 0.0
                rec["torch_threads"] = torch.get_num_threads()
            except Exception as exc:  # noqa: BLE001
                rec["error"] = str(exc)[:200]
        try:
            with open(os.environ["MLFT_BENCH_PROBE"], "a") as f:
                f.write(json.dumps(rec) + "\n")
        except OSError:
            pass

    atexit.register(_report)

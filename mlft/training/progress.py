"""One progress bar for a training run (in place of transformers' bar and its printed log dicts).

The bar shows steps, the last logged loss and learning rate; evaluation passes log their one-line summaries
above it (mlft.console writes through tqdm). Only rank 0 draws it. The Trainer's logs still reach `report_to`
(TensorBoard, W&B) and `trainer.state.log_history` untouched.
"""

from __future__ import annotations

from transformers import TrainerCallback


class TrainProgress(TrainerCallback):
    def __init__(self, name: str, enabled: bool = True):
        self.name, self.enabled, self.bar = name, enabled, None

    def on_train_begin(self, args, state, control, **kwargs):
        if self.enabled and state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=state.max_steps,
                initial=state.global_step,
                desc=f"train {self.name}",
                unit="step",
                dynamic_ncols=True,
            )

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.bar is not None and logs:
            post = {k: f"{logs[k]:.3g}" for k in ("loss", "learning_rate") if isinstance(logs.get(k), (int, float))}
            if post:
                self.bar.set_postfix(post, refresh=False)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def replace_progress(trainer, name: str, enabled: bool) -> None:
    """Swap transformers' progress bar / log printer for TrainProgress."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(TrainProgress(name, enabled))

"""The chat template used for training with assistant-only loss.

trl 1.16 masks the loss to assistant tokens only when the template marks them with `{% generation %}`; it
patches a list of known templates itself and raises for the rest. The embedded SmolLM2 template (ChatML with
a default system prompt) is not on that list, so mlft ships a training twin of it
(`templates/chatml_training.jinja`) that renders exactly the same text, with the assistant reply and its
`<|im_end|>` inside the markers (so the model learns to stop).

A recipe's `chat_template: auto` (the default) takes the model's own template; a model without one (a base model)
trains with that ChatML template, and `<|im_end|>` becomes the end of a turn (`base_model_template`). A recipe that
names a `.jinja` file trains with that file instead.
"""

from __future__ import annotations

from pathlib import Path

from mlft.errors import ConfigError

TEMPLATES = Path(__file__).parent / "templates"
TWINS = ("chatml_training.jinja",)  # training twins of model templates trl cannot patch
CHATML, CHATML_END = "chatml_training.jinja", "<|im_end|>"  # for a model without a template of its own
_SAMPLES = [
    [{"role": "user", "content": "Hallo?"}, {"role": "assistant", "content": "Hallo!"}],
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"},
        {"role": "assistant", "content": "Bye."},
    ],
]


def renders_same(tokenizer, template: str) -> bool:
    """True when `template` renders every sample conversation exactly like the tokenizer's own template."""
    for messages in _SAMPLES:
        for prompt_only in (False, True):
            msgs = messages[:-1] if prompt_only else messages
            own = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=prompt_only)
            twin = tokenizer.apply_chat_template(
                msgs, tokenize=False, add_generation_prompt=prompt_only, chat_template=template
            )
            if own != twin:
                return False
    return True


def base_model_template(tokenizer) -> tuple[str, str]:
    """(template text, end-of-turn token) for a tokenizer without a chat template: mlft's ChatML training template,
    whose turns end with `<|im_end|>`; a ConfigError when the vocabulary has no such token (name a template)."""
    end_id = tokenizer.convert_tokens_to_ids(CHATML_END)
    if end_id is None or end_id == tokenizer.unk_token_id:
        raise ConfigError(
            f"chat_template: the model has no chat template and its vocabulary has no {CHATML_END} token for "
            "mlft's ChatML one; write a template (a .jinja file) and set chat_template: PATH and "
            "training_args.eos_token"
        )
    return (TEMPLATES / CHATML).read_text(encoding="utf-8"), CHATML_END


def training_chat_template(tokenizer) -> str | None:
    """The template to train with: None = keep the tokenizer's; else the template text to install."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    current = tokenizer.chat_template
    if current and has_generation_markers(current):
        return None
    try:
        patched = get_training_chat_template(tokenizer)
        if patched is not None:
            return patched
    except ValueError:
        pass
    for name in TWINS:
        twin = (TEMPLATES / name).read_text(encoding="utf-8")
        if current and renders_same(tokenizer, twin):
            return twin
    raise ConfigError(
        "chat_template: the model's chat template has no {% generation %} markers and neither trl "
        "nor mlft knows a training twin for it; write one (a .jinja file) and set chat_template: "
        "PATH, or set training_args.assistant_only_loss: false"
    )

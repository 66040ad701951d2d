"""Normalisation to the conversational formats trl 1.16 accepts (messages; prompt/chosen/rejected)."""

from data_helpers import write_jsonl, write_mix
from trl.data_utils import is_conversational

from mlft.data.mix import build_mix, load_mix
from mlft.data.normalize import column_map, convert_row, to_preference

U, A = "user", "assistant"


def test_ultrafeedback_row_strips_the_shared_prompt():
    row = {
        "prompt": "Name a red fruit.",
        "chosen": [{"role": U, "content": "Name a red fruit."}, {"role": A, "content": "A strawberry."}],
        "rejected": [{"role": U, "content": "Name a red fruit."}, {"role": A, "content": "A banana."}],
    }
    ex = to_preference(row, column_map("preference", {}))
    assert ex == {
        "prompt": [{"role": U, "content": "Name a red fruit."}],
        "chosen": [{"role": A, "content": "A strawberry."}],
        "rejected": [{"role": A, "content": "A banana."}],
    }
    assert is_conversational(ex)
    no_prompt = to_preference({k: v for k, v in row.items() if k != "prompt"}, column_map("preference", {}))
    assert no_prompt == ex  # the shared prefix becomes the prompt


def test_plain_text_preference_and_bad_rows():
    cols = column_map("preference", {"prompt": "question"})
    ex = to_preference({"question": "Hi?", "chosen": "Hello!", "rejected": "Bye."}, cols)
    assert ex["prompt"] == [{"role": U, "content": "Hi?"}] and ex["rejected"] == [{"role": A, "content": "Bye."}]
    assert to_preference({"question": "Hi?", "chosen": "", "rejected": "Bye."}, cols) is None
    assert to_preference({"question": "Hi?", "chosen": 3, "rejected": "Bye."}, cols) is None


def test_sft_formats():
    share_gpt = {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]}
    ex = convert_row(share_gpt, "messages", column_map("messages", {"messages": "conversations"}))
    assert ex == {"messages": [{"role": U, "content": "Hi"}, {"role": A, "content": "Hello!"}]} and is_conversational(
        ex
    )
    cols = column_map("instruction", {"input": "context", "system": "sys"})
    ex = convert_row(
        {"instruction": "Summarise.", "context": "Long text.", "response": "Short.", "sys": "Be brief."},
        "instruction",
        cols,
    )
    assert [m["role"] for m in ex["messages"]] == ["system", U, A]
    assert ex["messages"][1]["content"] == "Summarise.\n\nLong text."
    ends_with_user = {
        "messages": [{"role": U, "content": "Hi"}, {"role": A, "content": "Yo"}, {"role": U, "content": "?"}]
    }
    assert convert_row(ends_with_user, "messages", column_map("messages", {})) is None


def test_local_dpo_mix_skips_malformed_rows(tmp_path):
    rows = [
        {"prompt": f"Question {i}?", "chosen": f"Good answer {i}.", "rejected": f"Bad answer {i}."} for i in range(4)
    ]
    rows.insert(2, {"prompt": "Broken?", "chosen": None, "rejected": "x"})
    write_jsonl(tmp_path / "prefs.jsonl", rows)
    path = write_mix(
        tmp_path,
        {
            "kind": "dpo",
            "total": 4,
            "decontaminate": {"enabled": False},
            "sources": [
                {
                    "name": "prefs",
                    "type": "local",
                    "path": "prefs.jsonl",
                    "format": "preference",
                    "language": "en",
                    "share": 1.0,
                }
            ],
        },
    )
    ds = build_mix(load_mix(path), tmp_path / "run", "dpo", progress=False)
    assert sorted(ds["id"]) == ["prefs:0", "prefs:1", "prefs:3", "prefs:4"]
    assert all(is_conversational(r) for r in ds)

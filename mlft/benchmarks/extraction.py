"""The extraction task's check: does a reply state the asked number, and only it?

An extractive prompt (mlft.data.extraction) carries its `answer` (the asked person's number) and its
`distractors` (every other number the passage states). A reply answers when the numbers it writes
(mlft.benchmarks.answers.numbers: digits of any script) include the answer and none of the distractors: an echo
of the passage states every number, so it does not count as an answer, and neither does a list of candidates.
Other numbers (a restated question, a count) do not matter; number words are not read (the answers are room
numbers, which replies write in digits). The check reads numbers, not what a reply attaches them to: a garbled
reply that calls the room number the bus and the room counts.
"""

from __future__ import annotations

from mlft.benchmarks.answers import numbers


def states(found: list[float], value: float) -> bool:
    return any(abs(x - value) < 1e-6 for x in found)


def extraction_correct(reply: str | None, answer: float, distractors) -> bool:
    """Whether `reply` states `answer` and none of `distractors`."""
    found = numbers(reply or "")
    return states(found, float(answer)) and not any(states(found, float(d)) for d in distractors)

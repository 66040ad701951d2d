"""File plumbing shared by every stage: advisory output locks, JSONL with crash repair, checksummed downloads."""

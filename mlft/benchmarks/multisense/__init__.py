"""Multisense self-consistency (Ohmer, Bruni & Hupkes, 2023): PAWS-X / XNLI in en, de, zh."""

"""Polyglot-or-Not (Schott, Furman & Bhat, 2023): fact recall in 20 languages by contrastive knowledge assessment."""

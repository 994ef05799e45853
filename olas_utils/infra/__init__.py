"""Plumbing every layer shares: where things are (``settings``), atomic writes (``atomic``),
fingerprints and recorded hashes (``fingerprint``), worker pools (``pools``)."""

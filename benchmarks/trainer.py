"""Trainer overhead (data, logging, checkpointing) as a fraction of step time

The ``trainer`` benchmark (tokengeo.bench.registry): one ``--flag`` per field
of its config; prints one JSON object. ``tokengeo bench trainer`` runs the same.
"""

import sys

from tokengeo.bench.registry import script

if __name__ == "__main__":
    sys.exit(script("trainer"))

"""``python -m tokengeo`` (also what ``torchrun -m tokengeo`` runs)."""

import sys

from tokengeo.cli import main

sys.exit(main())

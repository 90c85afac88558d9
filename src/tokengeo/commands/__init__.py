"""Sub-commands of the ``tokengeo`` CLI (see :mod:`tokengeo.cli`)."""

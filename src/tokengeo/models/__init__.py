"""tokengeo.models: tokengeo's own model families and their registry; the Hugging Face
bridge is the subpackage :mod:`tokengeo.models.hf`.

Importing the package registers the built-in variants (:mod:`tokengeo.models.zoo`) and the
``hf:<source>`` pretrained-LM names (:mod:`tokengeo.models.hf.lm`) into
:mod:`tokengeo.models.registry`; the registry itself imports no family.
"""

from tokengeo.models import zoo  # noqa: F401  (registers the built-in variants)
from tokengeo.models.hf import lm  # noqa: F401  (registers the hf:<source> names)

"""tokengeo.models: the model families, their registry and the Hugging Face adapters.

Importing the package registers the built-in variants (:mod:`tokengeo.models.zoo`) and the
``hf:<source>`` pretrained-LM names (:mod:`tokengeo.models.hf_lm`) into
:mod:`tokengeo.models.registry`; the registry itself imports no family.
"""

from tokengeo.models import (
    hf_lm,  # noqa: F401  (registers the hf:<source> names)
    zoo,  # noqa: F401  (registers the built-in variants)
)

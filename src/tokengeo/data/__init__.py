"""tokengeo.data: offline datasets and tokenizers.

    load_dataset("fashion-mnist", seed=0)          # ImageClassificationData
    load_dataset("shakespeare-char")               # LanguageModelData (split by work)
    load_dataset("tweets", tokenizer="bpe")        # TextClassificationData
    load_dataset("path/to/texts/")                 # the user's own data
    load_corpus("python-docs")                     # list[str] of documents

Every loader reads its source where it is installed; a missing source raises
:class:`tokengeo.errors.DataNotFoundError` naming the install command.
"""

from tokengeo.data.bpe import BPETokenizer, gpt2_tokenizer, train_bpe
from tokengeo.data.bundles import (
    ImageClassificationData,
    ImageSplit,
    LanguageModelData,
    TextClassificationData,
    TextSplit,
)
from tokengeo.data.corpus import CORPORA, load_corpus, load_corpus_dict
from tokengeo.data.registry import (
    KINDS,
    DatasetInfo,
    dataset_info,
    dataset_kind,
    dataset_options,
    list_datasets,
    load_dataset,
    path_kind,
    register_dataset,
)
from tokengeo.data.samplers import EpochBatchSampler, RandomWindowSampler
from tokengeo.data.tokenizer import CharTokenizer, Tokenizer, encode_documents
from tokengeo.data.windows import TokenWindows

__all__ = [
    "BPETokenizer", "CORPORA", "CharTokenizer", "DatasetInfo", "EpochBatchSampler",
    "ImageClassificationData", "ImageSplit", "KINDS", "LanguageModelData",
    "RandomWindowSampler", "TextClassificationData", "TextSplit", "TokenWindows", "Tokenizer",
    "dataset_info", "dataset_kind", "dataset_options", "encode_documents", "gpt2_tokenizer",
    "list_datasets", "load_corpus", "load_corpus_dict", "load_dataset", "path_kind",
    "register_dataset", "train_bpe",
]  # fmt: skip

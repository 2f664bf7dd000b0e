import hashlib
import os
import stat
import subprocess
import sys

import pytest

from agent_cli.core import tokens


def test_published_ids_for_both_shipped_encodings():
    assert tokens.get_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert tokens.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_model_names_map_through_tiktokens_table():
    assert tokens.encoding_name_for_model("gpt-4") == "cl100k_base"
    assert tokens.encoding_name_for_model("gpt-4o-mini") == "o200k_base"
    assert tokens.encoding_name_for_model("llama3.1:8b") == "o200k_base"
    assert tokens.encode("hello world", "gpt-4") == [15339, 1917]


def test_counting_and_truncation():
    assert tokens.count("hello world") == 2
    assert tokens.count("<|endoftext|>") > 1  # special tokens count as plain text
    cut = tokens.truncate("one two three four five", 2)
    assert tokens.count(cut) == 2 and "one" in cut


@pytest.mark.slow
def test_works_with_no_network_and_an_empty_cache(tmp_path):
    code = (
        "from agent_cli.core import tokens;"
        "print(tokens.encode('hello world'), tokens.encode('hello world', 'gpt-4'))"
    )
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0 and "unshare" in proc.stderr:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.stdout.strip() == "[24912, 2375] [15339, 1917]", proc.stderr


def test_a_corrupted_cache_file_is_replaced(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    key = hashlib.sha1(tokens._URLS["cl100k_base"].encode()).hexdigest()
    (tmp_path / key).write_bytes(b"garbage")
    tokens._seed_cache("cl100k_base")
    data = (tmp_path / key).read_bytes()
    assert hashlib.sha256(data).hexdigest() == tokens._SHA256["cl100k_base"]


def test_an_encoding_loads_in_a_worker_thread_for_the_first_count():
    import threading

    from agent_cli.core import tokens

    tokens.get_encoding.cache_clear()
    before = set(threading.enumerate())
    tokens.load_in_background("cl100k_base", after_s=0.5)  # alive when looked for below
    worker = next(t for t in set(threading.enumerate()) - before if t.name == "load-tokenizer")
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert tokens.get_encoding.cache_info().currsize == 1  # loaded by the worker, not by us
    hits = tokens.get_encoding.cache_info().hits
    assert tokens.get_encoding("cl100k_base").encode("hello world")
    assert tokens.get_encoding.cache_info().hits == hits + 1


def _fresh(monkeypatch, cache_dir):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
    tokens.get_encoding.cache_clear()


def test_cache_files_are_written_with_the_umask_for_other_users_to_read(tmp_path, monkeypatch):
    _fresh(monkeypatch, tmp_path)
    old = os.umask(0o022)
    try:
        tokens._seed_cache("cl100k_base")
    finally:
        os.umask(old)
    (written,) = tmp_path.iterdir()
    assert stat.S_IMODE(written.stat().st_mode) == 0o644


def _key(name):
    return hashlib.sha1(tokens._URLS[name].encode()).hexdigest()


@pytest.mark.parametrize("cache", ["unreadable", "under_a_file", "off"])
def test_a_cache_that_cannot_be_used_falls_back_to_the_shipped_file(tmp_path, monkeypatch, cache):
    if cache == "unreadable":  # another user's file: open() fails, as on a directory
        cache_dir = tmp_path / "cache"
        (cache_dir / _key("o200k_base")).mkdir(parents=True)
        (cache_dir / _key("cl100k_base")).mkdir()
    elif cache == "under_a_file":  # neither read nor created (tiktoken would download)
        (tmp_path / "file").write_text("")
        cache_dir = tmp_path / "file" / "cache"
    else:  # TIKTOKEN_CACHE_DIR="" turns tiktoken's cache off (it would download)
        cache_dir = ""
    _fresh(monkeypatch, cache_dir)
    try:
        assert tokens.encode("hello world") == [24912, 2375]
        assert tokens.encode("hello world", "gpt-4") == [15339, 1917]
        assert tokens.count("<|endoftext|>") > 1
    finally:
        tokens.get_encoding.cache_clear()


# text that exercises each branch of the encodings' split patterns: contractions, capitals,
# digit runs, punctuation runs with line ends, whitespace runs, letters of other scripts
SAMPLE = (
    "We'll SEE what's THEIR'S: x = 12345678 + 0.5e-3; print(f'{x!r}')\r\n\n\n"
    "    def naïve_Ünïcode(self) -> dict[str, int]:  # 日本語のテキスト, русский, 한국어 🙂\n"
    "\t\t  trailing spaces   \nI'M DONE'S ll've'd <|endoftext|> <|endofprompt|>\n"
)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_encoding_built_in_memory_is_tiktokens_own(name):
    """The fallback copies tiktoken's split pattern and special tokens: it must split, merge
    and name special tokens exactly as the encoding tiktoken loads from its cache."""
    own, built = tokens.get_encoding(name), tokens._in_memory(name)
    text = SAMPLE + open(__file__, encoding="utf-8").read()
    plain = built.encode(text, disallowed_special=())
    assert plain == own.encode(text, disallowed_special=()) and len(plain) > 1000
    assert built.encode(SAMPLE, allowed_special="all") == own.encode(SAMPLE, allowed_special="all")
    assert built.special_tokens_set == own.special_tokens_set
    assert (built.n_vocab, built.max_token_value) == (own.n_vocab, own.max_token_value)

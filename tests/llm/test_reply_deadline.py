"""Every exchange ends within its whole-reply bound, however the server dribbles it out: response
headers a byte at a time, or an event stream whose bytes never end a line. The HTTP read timeout
starts again with every byte, so only a wall-clock bound ends these."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from agent_cli.core.errors import ModelError
from agent_cli.llm.openai.chat import OpenAIChat
from agent_cli.llm.wire.stream import StreamStalled, paced

ASK = [{"role": "user", "content": "go"}]
TRICKLE_S = 20.0  # how long the server dribbles before giving up: past every bound below
REPLY = json.dumps(
    {"choices": [{"index": 0, "message": {"content": "fine"}, "finish_reason": "stop"}]}
).encode()

Answer = Callable[[socket.socket], None]


def _read_request(conn: socket.socket) -> bytes:
    """Read one request; its request line."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(v)
            for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
            if k.lower() == b"content-length"
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head.split(b"\r\n")[0]


def _trickle(conn: socket.socket, start: bytes, byte: bytes) -> None:
    conn.sendall(start)
    until = time.monotonic() + TRICKLE_S
    while time.monotonic() < until:
        conn.sendall(byte)
        time.sleep(0.1)


def _whole(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
        + f"Content-Length: {len(REPLY)}\r\n\r\n".encode()
        + REPLY
    )


@pytest.fixture
def raw_server() -> Iterator[Callable[[list[Answer]], str]]:
    """A loopback server answering its n-th chat request with the n-th answer (the last
    repeats), and any other request (the probes of a local server) with `others`."""
    listeners: list[socket.socket] = []

    def start(answers: list[Answer], others: Answer = _whole) -> str:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        listeners.append(sock)

        chats = iter(range(1_000_000))

        def serve(conn: socket.socket) -> None:
            with conn:
                try:
                    if b"/chat/completions" in _read_request(conn):
                        answers[min(next(chats), len(answers) - 1)](conn)
                    else:
                        others(conn)
                except OSError:
                    pass  # the client hung up

        def accept() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"

    yield start
    for sock in listeners:
        sock.close()


def _model(url: str, **kw) -> OpenAIChat:
    return OpenAIChat(
        model="m", base_url=url, api_key=None, timeout_s=1.0, total_timeout_s=1.5, **kw
    )


@pytest.mark.parametrize("stream", [True, False])
def test_response_headers_trickled_a_byte_at_a_time_are_ended(raw_server, stream):
    def slow_headers(conn):
        return _trickle(conn, b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a")

    model = _model(raw_server([slow_headers, _whole]), stream=stream, max_retries=2)
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        model.chat(ASK)
    assert time.monotonic() - started < TRICKLE_S - 5  # generous: it is not waited out
    assert "the reply went on for over 1.5 s, so the request was ended" in str(caught.value)
    assert model.chat(ASK).content == "fine"  # the model client still works afterwards


def test_a_local_server_trickling_its_probe_answers_does_not_hold_up_the_request(raw_server):
    def slow_body(conn):
        return _trickle(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{", b" ")

    model = _model(raw_server([_whole], others=slow_body), max_tokens=100)
    started = time.monotonic()
    assert model.chat(ASK).content == "fine"  # it asked the window of /props and the others
    assert time.monotonic() - started < TRICKLE_S - 5
    assert model.context_source == "the context_window setting"


def _stream_start(conn: socket.socket, first: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    _trickle(conn, head + first, first[-1:])


def test_a_stream_of_comment_bytes_that_never_end_a_line_ends_like_silence(raw_server):
    url = raw_server([lambda conn: _stream_start(conn, b": ")])
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        _model(url, max_retries=0).chat(ASK)
    assert time.monotonic() - started < TRICKLE_S - 5
    assert "sent only keep-alive comments and no reply for 1 s" in str(caught.value)


def test_a_data_line_that_never_ends_is_ended_at_the_whole_reply_bound(raw_server):
    url = raw_server([lambda conn: _stream_start(conn, b"data: x")])
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        _model(url, max_retries=2).chat(ASK)
    assert time.monotonic() - started < TRICKLE_S - 5
    assert "the reply went on for over 1.5 s, so the request was ended" in str(caught.value)


def test_paced_splits_lines_on_any_line_ending_across_chunks():
    chunks = [b"data: a\r", b"\ndata: b\rdata: c", b"\n\n: ping\r\n", b"data: d"]
    assert list(paced(iter(chunks), silence_s=10, total_s=10)) == [
        "data: a",
        "data: b",
        "data: c",
        "",
        ": ping",
        "data: d",
    ]


def test_paced_checks_the_bounds_at_every_chunk_not_every_line():
    now = [0.0]

    def clock() -> float:
        return now[0]

    def chunks():
        while True:
            now[0] += 0.4
            yield b": "

    with pytest.raises(StreamStalled, match="only keep-alive comments"):
        list(paced(chunks(), silence_s=1.0, total_s=10, clock=clock))

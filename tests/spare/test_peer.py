"""The spare's own check of a peer's confinement (agent_server/spare/_peer.py), with real processes:
a peer is a child process that connects to a listening socket here; the check reads it from the
kernel. Each test is named after the failure it pins."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from agent_server.spare import _peer

CONNECT = """
import ctypes, socket, sys
if sys.argv[2] == "nnp":
    assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(b"R")
s.recv(10)  # until the check is done
"""


def _check_a_peer(tmp_path, mode: str) -> str | None:
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen()
    child = subprocess.Popen([sys.executable, "-c", CONNECT, path, mode])
    try:
        listener.settimeout(10)
        conn, _ = listener.accept()
        conn.settimeout(10)
        assert conn.recv(10) == b"R"
        if mode == "gone":
            child.kill()
            child.wait()
        why = _peer.refusal(conn, _peer.Own())
        conn.close()
        return why
    finally:
        listener.close()
        child.kill()
        child.wait()


def test_a_plain_peer_of_the_spares_confinement_is_accepted(tmp_path):
    assert _check_a_peer(tmp_path, "plain") is None


def test_a_peer_with_no_new_privs_set_is_refused_whatever_it_sends(tmp_path):
    assert "NoNewPrivs:\t0" in open("/proc/self/status").read()  # else the test process itself is confined
    why = _check_a_peer(tmp_path, "nnp")
    assert why is not None and "status differs" in why, why


def test_a_peer_that_ended_before_the_check_is_refused(tmp_path):
    why = _check_a_peer(tmp_path, "gone")
    assert why is not None, why


def test_a_peer_in_another_user_namespace_is_refused(tmp_path):
    """unshare -U: the namespaces differ though every status field may be equal."""
    if subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode != 0:
        import pytest
        pytest.skip("no user namespaces here")
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen()
    child = subprocess.Popen(["unshare", "-U", sys.executable, "-c", CONNECT, path, "plain"])
    try:
        listener.settimeout(10)
        conn, _ = listener.accept()
        conn.settimeout(10)
        assert conn.recv(10) == b"R"
        why = _peer.refusal(conn, _peer.Own())
        conn.close()
    finally:
        listener.close()
        child.kill()
        child.wait()
    assert why is not None, why


def test_a_socketpair_in_this_process_is_its_own_peer_and_accepted():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        assert _peer.refusal(a, _peer.Own()) is None
    finally:
        a.close()
        b.close()

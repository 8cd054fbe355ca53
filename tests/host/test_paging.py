"""session/list pages: every session once, newest first, stable while sessions change."""

import pytest

from agent_server.host.paging import BadCursor, encode_cursor, page


def entries(n):
    return [(1000.0 + i // 3, f"s{i:03d}", {"sessionId": f"s{i:03d}"}) for i in range(n)]


def walk(items, size):
    out, cursor, pages = [], None, 0
    while True:
        got, cursor = page(items, cursor, size)
        out += [i["sessionId"] for i in got]
        pages += 1
        if cursor is None:
            return out, pages


def test_pages_cover_every_entry_once_in_order():
    items = entries(120)
    ids, pages = walk(items, 50)
    assert pages == 3 and len(ids) == 120 and len(set(ids)) == 120
    expected = [i for _, i, _ in sorted(((u, s, None) for u, s, _ in items), reverse=True)]
    assert ids == expected


def test_a_session_written_to_between_pages_is_not_repeated_and_none_is_skipped():
    items = entries(10)
    first, cursor = page(items, None, 4)
    items = [(2000.0, "s000", {"sessionId": "s000"}) if s == "s000" else (u, s, i) for u, s, i in items]
    rest, cursor2 = page(items, cursor, 100)
    listed = [i["sessionId"] for i in first + rest]
    assert len(listed) == len(set(listed))
    assert set(listed) | {"s000"} == {f"s{i:03d}" for i in range(10)}
    assert cursor2 is None


@pytest.mark.parametrize("cursor", ["", "!!!", encode_cursor(1.0, "x")[:-3] + "zzz", "eyJ1IjoxfQ"])
def test_cursors_it_did_not_make_are_refused(cursor):
    with pytest.raises(BadCursor):
        page(entries(3), cursor, 2)

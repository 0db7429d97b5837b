"""Vectorised field parsing against the standard library, and line bookkeeping across block boundaries."""

from __future__ import annotations

import calendar
import math
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from wevent.producers.textio import (ISO_SECONDS, TWITTER_UTC, SkippedLines, block_of_bytes, parse_decimals, parse_integers,
                              parse_times, read_blocks, split_fields)


def _column(texts: list[str]):
    """A one-column block of ``texts`` and the (buffer, start, end) of its fields."""
    block = block_of_bytes("".join(t + "\n" for t in texts).encode("latin-1"))
    fields = split_fields(block, "\t", 1, SkippedLines())
    assert fields.lines.size == len(texts)
    return (block.buffer, *fields.column(0))


def _standard(parse, text):
    try:
        return parse(text)
    except ValueError:
        return None


number_text = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(-200, 200).map(lambda x: f"{x:.5f}"),
    st.integers(-10**20, 10**20).map(str),
    st.text(alphabet="0123456789.-+eE _xin", min_size=1, max_size=25),
)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(number_text.filter(lambda t: t.strip(" ") == t and t), min_size=1, max_size=40))
def test_decimals_and_integers_read_as_float_and_int_do(texts):
    values, ok = parse_decimals(*_column(texts))
    for text, value, good in zip(texts, values, ok):
        want = _standard(float, text)
        want = want if want is not None and math.isfinite(want) else None
        assert good == (want is not None), text
        if good:
            assert value == want and math.copysign(1, value) == math.copysign(1, want), text
    integers, ok = parse_integers(*_column(texts))
    for text, value, good in zip(texts, integers, ok):
        want = _standard(int, text)
        want = want if want is not None and -(2**63) <= want < 2**63 else None
        assert good == (want is not None) and (not good or value == want), text


moments = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 12, 31))


def _mutate(text: str, position: int, char: str) -> str:
    return text[:position] + char + text[position + 1:]


@settings(max_examples=60, deadline=None)
@given(when=st.lists(st.tuples(moments, st.integers(0, 29), st.sampled_from("0123456789 :-+/aT")), min_size=1,
                     max_size=30),
       offset=st.integers(-720, 840))
def test_times_read_as_strptime_does(when, offset):
    iso = [_mutate(moment.strftime("%Y-%m-%d %H:%M:%S"), pos % 19, char) if pos >= 15 else
           moment.strftime("%Y-%m-%d %H:%M:%S") for moment, pos, char in when]
    got, ok = parse_times(*_column(iso), ISO_SECONDS, offset)
    for text, value, good in zip(iso, got, ok):
        try:
            want = calendar.timegm(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timetuple()) - offset * 60
        except ValueError:
            want = None
        assert good == (want is not None) and (not good or value == want), text
    zone = timezone(timedelta(minutes=offset))
    tweets = [(moment.replace(tzinfo=zone).strftime("%a %b %d %H:%M:%S %z %Y"), pos, char)
              for moment, pos, char in when]
    tweets = [_mutate(text, pos, char) if pos % 3 == 0 else text for text, pos, char in tweets]
    got, ok = parse_times(*_column(tweets), TWITTER_UTC)
    for text, value, good in zip(tweets, got, ok):
        try:
            want = int(datetime.strptime(text, "%a %b %d %H:%M:%S %z %Y").timestamp())
        except ValueError:
            want = None
        assert good == (want is not None) and (not good or value == want), text


def test_line_numbers_survive_block_boundaries(tmp_path):
    contents = [b"a,1\r\nb,2\r\n\r\nc,3", b"", b"d,4\n" * 300 + b"e," + b"5" * 5000 + b"\nf,6\n"]
    paths = []
    for i, content in enumerate(contents):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_bytes(content)
    expected = [(str(p), n, line.rstrip(b"\r")) for p, c in zip(paths, contents)
                for n, line in enumerate(c.split(b"\n"), start=1) if line.rstrip(b"\r")]
    for block_bytes in (7, 64, 1 << 20):
        seen = []
        for block in read_blocks(paths, block_bytes):
            for i in range(block.lines):
                text = block.buffer[block.starts[i]:block.ends[i]].tobytes()
                if text:
                    seen.append((block.paths[block.files[i]], int(block.numbers[i]), text))
        assert seen == expected, block_bytes


def test_split_fields_counts_wrong_column_counts():
    skipped = SkippedLines(keep=2)
    block = block_of_bytes(b"a,b\na\n\na,b,c\nx,y\n,\n", "f.txt")
    fields = split_fields(block, ",", 2, skipped)
    assert skipped.counts == {"wrong column count": 2}
    assert skipped.first["wrong column count"] == [("f.txt", 2), ("f.txt", 4)]
    assert fields.lines.tolist() == [0, 4, 5]
    assert fields.strings(1).tolist() == [b"b", b"y", b""] and skipped.counts["bad field"] == 1
    assert "wrong column count 2 (f.txt:2, f.txt:4)" in skipped.describe()

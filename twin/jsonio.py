"""JSON written as `json.dumps` writes it and read as `json.loads` reads it, at orjson's speed
where that is exact."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")


def dumps(value: Any) -> bytes | str:
    """`json.dumps(value)` (the same JSON values), at orjson's speed where that is exact
    (queues.json: millions of samples, 6x faster); a numpy array as the list of its values
    (`tolist`: the simulator's queue series, written without a Python integer each). orjson
    writes NaN and infinities as null, where json.dumps writes NaN and Infinity: output with
    a null is written again by json.dumps, as is a value orjson refuses (an integer over 64
    bits, a tuple subclass).

    >>> import numpy as np
    >>> dumps({1: [0.5, "a"]}), dumps({"x": float("nan")}), dumps([2**70])
    (b'{"1":[0.5,"a"]}', '{"x": NaN}', '[1180591620717411303424]')
    >>> dumps({"q": np.array([3, 700], np.int32)}), dumps([None, np.array([1.5])])
    (b'{"q":[3,700]}', '[null, [1.5]]')
    """
    options = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
    try:
        out = orjson.dumps(
            value,
            option=options | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_SERIALIZE_NUMPY,
        )
    except TypeError:
        return json.dumps(value, default=_listed)
    return json.dumps(value, default=_listed) if b"null" in out else out


def _listed(value: Any) -> Any:
    """A numpy array (or scalar) as json.dumps writes its `tolist()`; else json's refusal."""
    if hasattr(value, "tolist") and type(value).__module__ == "numpy":
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG = b"0" * 19
"""19 digits in a row: an integer orjson may read as a float (beyond 64 bits), or none."""


def loads(raw: bytes | str) -> Any:
    """`json.loads(raw)`: the same value, or the same error, at orjson's speed where that is
    exact (a 1,024-server lab's 1,198 config files and its run's queues.json: 1.3-1.6x, the
    check for long numbers a seventh of it). What orjson refuses (NaN, infinities, a number
    beyond a float, a byte-order mark, a lone surrogate, nesting past 1,024 levels, text
    that is not JSON) is read by json.loads, as is text with 19 digits in a row: orjson
    reads an integer beyond 64 bits as a float.

    >>> loads(b'{"a": [1, 0.5]}'), loads(b"[NaN]"), loads(b"18446744073709551616")
    ({'a': [1, 0.5]}, [nan], 18446744073709551616)
    """
    data = raw if isinstance(raw, bytes) else raw.encode(errors="surrogatepass")
    if data.translate(_DIGITS).find(_LONG) < 0:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def copied(value: Any) -> Any:
    """`json.loads(json.dumps(value))`: the value as a JSON file of it reads back (lists for
    tuples, string keys), nothing of it shared; at orjson's speed where `dumps` is exact.

    >>> copied({1: (0.5, "a"), "n": None}), copied({"x": float("inf")})
    ({'1': [0.5, 'a'], 'n': None}, {'x': inf})
    """
    text = dumps(value)
    return orjson.loads(text) if isinstance(text, bytes) else json.loads(text)


def digest(value: Any) -> bytes:
    """A 16-byte BLAKE2b digest of `dumps(value)`: equal for values `json.dumps` writes
    alike (their keys in the same order), to recognise a value seen before without keeping
    it.

    >>> digest({"a": [1]}) == digest({"a": [1]}) != digest({"a": ["1"]}), len(digest(None))
    (True, 16)
    """
    text = dumps(value)
    return hashlib.blake2b(
        text if isinstance(text, bytes) else text.encode(), digest_size=16
    ).digest()


class Memo(Generic[T]):
    """What `make` gave for a JSON value, kept by the value's `digest` for the `size` values
    most recently asked of (a fabric's switches hold the same tables word for word: each is
    judged once).

    >>> memo, made = Memo[int](2), []
    >>> [memo.get(v, lambda: made.append(v) or len(made)) for v in ([1], [1], {"a": 1}, [1])]
    [1, 1, 2, 1]
    >>> made
    [[1], {'a': 1}]
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[bytes, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, value: Any, make: Callable[[], T]) -> T:
        """`make()` the first time `value` (or one written alike) is asked of, else what it
        gave then (two threads asking at once may both make it: the last one made is kept)."""
        key = digest(value)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        made = make()
        with self._lock:
            self._kept[key] = made
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return made

"""Hive text forms (LazySimpleSerDe) → Arrow, vectorised; shared by the delimited, regex and JSON parsers.

Every converter takes a (large) string array whose nulls mean "field absent" and returns the values Hive would
store (lenient mode uses them as they are) plus a numpy mask of the elements strict mode rejects: text that does
not parse (Hive stores NULL) or that Hive only reads through a lossy fallback.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acidstream.acid.types import HiveType

native_split_uniform: Callable[..., list[tuple[bytes, bytes]] | None] | None
try:
    from acidstream.streaming.records._native import split_uniform as native_split_uniform
except ImportError:  # the extension is not built: numpy does it
    native_split_uniform = None

#: LazySerDeParameters: levels 0..2 are field/collection/map-key delimiters, the deeper ones bytes 4, 5, ... 8.
DEFAULT_SEPARATORS = ("\x01", "\x02", "\x03", "\x04", "\x05", "\x06", "\x07", "\x08")

_INT_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
_INT_RE = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"
_FLOAT_RE = r"^\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\s*$"
_DECIMAL_RE = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
_DATE_RE = r"^(?P<y>-?[0-9]{1,4})-(?P<m>[0-9]{1,2})-(?P<d>[0-9]{1,2})(?:[^0-9].*)?$"
#: TimestampUtils.stringToTimestamp also takes a zoned timestamp and keeps its wall-clock time.
_ZONE = r"(?:\s*(?:Z|(?:UTC|GMT|UT)?[+-][0-9]{1,2}(?::?[0-9]{2})?|UTC|GMT|UT|[A-Za-z]+/[A-Za-z0-9_/+-]+))?"
_TS_RE = (
    r"^(?P<y>-?[0-9]{1,10})-(?P<m>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
    r"(?: (?P<H>[0-9]{1,2}):(?P<M>[0-9]{1,2}):(?P<S>[0-9]{1,2})(?:\.(?P<f>[0-9]{1,9}))?)?" + _ZONE + "$"
)
_TS_ISO_RE = (
    r"^(?P<y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})"
    r"T(?P<H>[0-9]{2}):(?P<M>[0-9]{2})(?::(?P<S>[0-9]{2})(?:\.(?P<f>[0-9]{1,9}))?)?" + _ZONE + "$"
)
_BASE64_RE = r"^[A-Za-z0-9+/=_\-\s]*$"
_NS_PER_S = 1_000_000_000
_MAX_TS_SECONDS = (2**63 - 1) // _NS_PER_S - 1


@dataclass(frozen=True)
class TextFormat:
    """How values are written as text: the separator of each nesting level and the null sequence."""

    separators: tuple[str, ...] = DEFAULT_SEPARATORS
    null_sequence: str | None = "\\N"  # None: no text means NULL (JSON strings)


@dataclass
class Converted:
    """A typed array and the mask of elements whose text did not parse (those are null in ``values``)."""

    values: pa.Array
    bad: np.ndarray


def mask(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as a numpy mask, null counting as False."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def levels_needed(t: HiveType) -> int:
    """How many separator levels a column of this type consumes below the field level."""
    if t.name == "array":
        return 1 + levels_needed(t.children[0])
    if t.name == "map":
        return 2 + max(levels_needed(t.children[0]), levels_needed(t.children[1]))
    if t.name == "struct":
        return 1 + max(levels_needed(c) for c in t.children)
    return 0


def convert(text: pa.Array, t: HiveType, fmt: TextFormat, level: int = 1) -> Converted:
    """Convert Hive text forms to ``t.to_arrow()``; ``level`` is the separator level of the value's own items."""
    text = _as_large_string(text)
    null_sequence = fmt.null_sequence
    if null_sequence is not None and (
        may_contain(text, null_sequence.encode()[0]) if null_sequence else _may_be_empty(text)
    ):
        text = pc.if_else(pc.equal(text, null_sequence), pa.scalar(None, pa.large_string()), text)
    if not t.is_string_like and t.name != "binary" and t.is_primitive and _may_be_empty(text):
        text = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.large_string()), text)
    if t.name in _INT_RANGES:
        return _integers(text, t)
    simple = _PRIMITIVE_CONVERTERS.get(t.name)
    if simple is not None:
        return simple(text, t)
    if t.name == "array":
        return _array(text, t, fmt, level)
    if t.name == "map":
        return _map(text, t, fmt, level)
    return _struct(text, t, fmt, level)


def split_fields(text: pa.Array, separator: str, count: int) -> tuple[list[pa.Array], np.ndarray]:
    """Split each string on ``separator``; field i of every row (null where missing) and the field counts."""
    uniform = _split_uniform(text, separator, count)
    if uniform is not None:
        return uniform, np.full(len(text), count, dtype=np.int64)
    parts = pc.split_pattern(text, separator)
    lengths = np.asarray(pc.fill_null(pc.list_value_length(parts), 0).to_numpy(), dtype=np.int64)
    flat = parts.flatten()
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(lengths) else lengths
    fields = []
    fewest = int(lengths.min()) if len(lengths) and parts.null_count == 0 else 0
    for i in range(count):
        if i < fewest:  # every row has field i: no gather with nulls needed
            fields.append(pc.list_element(parts, i))
        else:
            fields.append(flat.take(pa.array(starts + i, mask=~(lengths > i))))
    return fields, lengths


def _split_uniform(text: pa.Array, separator: str, count: int) -> list[pa.Array] | None:
    """The usual case, found on the raw bytes: a one-byte separator and exactly ``count`` fields in every
    (non-null) string. None otherwise. In C when the extension is built (a memchr pass and a memcpy pass,
    ~6x faster), else in numpy."""
    sep = separator.encode()
    n = len(text)
    if len(sep) != 1 or text.type != pa.large_string() or text.null_count or n == 0 or count < 1:
        return None
    _, offsets_buffer, data = text.buffers()
    split = _split_uniform_native if native_split_uniform is not None else _split_uniform_numpy
    return split(text, offsets_buffer, data, sep[0], count)


def _split_uniform_native(
    text: pa.Array, offsets_buffer: pa.Buffer, data: pa.Buffer | None, sep: int, count: int
) -> list[pa.Array] | None:
    """Each field's bytes copied out contiguously by the extension: one array per field, no take."""
    assert native_split_uniform is not None
    n = len(text)
    offsets = memoryview(offsets_buffer)[text.offset * 8 : (text.offset + n + 1) * 8]
    fields = native_split_uniform(data if data is not None else b"", offsets, sep, count)
    if fields is None:
        return None
    return [pa.LargeStringArray.from_buffers(n, pa.py_buffer(o), pa.py_buffer(d)) for o, d in fields]


def _split_uniform_numpy(
    text: pa.Array, offsets_buffer: pa.Buffer, data: pa.Buffer | None, sep: int, count: int
) -> list[pa.Array] | None:
    """The strings are contiguous in the data buffer, so new offsets at every record start, separator and byte
    after it cut the same buffer into fields and one-byte separators: field i of record r is element
    ``r * (2 * count - 1) + 2 * i`` of that zero-copy array, gathered by one take per field. ``split_pattern``
    builds a list array of every field instead, at three times the cost.
    """
    n = len(text)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64, count=n + 1, offset=text.offset * 8)
    low, high = int(offsets[0]), int(offsets[-1])
    raw = (
        np.frombuffer(data, dtype=np.uint8, count=high - low, offset=low) if data is not None else np.empty(0)
    )
    found = np.flatnonzero(raw == sep) + low
    k = count - 1
    if len(found) != n * k:
        return None
    if k == 0:
        return [text]
    # The r-th group of k separators lies in record r for every r: each record then holds at least k, and
    # with n * k in all, exactly k.
    seps = found.reshape(n, k)
    if not ((seps[:, 0] >= offsets[:-1]).all() and (seps[:, -1] < offsets[1:]).all()):
        return None
    width = 2 * count - 1
    cuts = np.empty(n * width + 1, dtype=np.int64)
    grid = cuts[:-1].reshape(n, width)
    grid[:, 0] = offsets[:-1]
    grid[:, 1::2] = seps
    grid[:, 2::2] = seps + 1
    cuts[-1] = high
    pieces = pa.LargeStringArray.from_buffers(n * width, pa.py_buffer(cuts), data)
    every = np.arange(0, n * width, width, dtype=np.int64)
    return [pieces.take(every + 2 * i) for i in range(count)]


def _as_large_string(text: pa.Array) -> pa.Array:
    return text if text.type == pa.large_string() else text.cast(pa.large_string())


# Whole-column checks (a null sequence, empty texts, hex markers) are rare hits: a scan of the array's raw
# buffers rules most of them out for a fraction of an Arrow kernel's cost. A false "maybe" only costs the
# exact check it would have skipped.


def may_contain(text: pa.Array, *byte_values: int) -> bool:
    """False when no value of a large string array can hold any of these bytes (its data buffer lacks them)."""
    data = text.buffers()[2]
    if data is None:
        return False
    raw = np.frombuffer(data, dtype=np.uint8)
    return any(bool((raw == b).any()) for b in byte_values)


def _may_be_empty(text: pa.Array) -> bool:
    """False when no element of a large string array (null or not) has length 0."""
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset : text.offset + len(text) + 1]
    return bool((offsets[1:] == offsets[:-1]).any())


def _integers(text: pa.Array, t: HiveType) -> Converted:
    """LazyInteger/LazyLong: optional sign, ASCII digits, no blanks, out of range does not parse; a fraction of
    digits is allowed and truncated ('12.9' → 12, as Hive 3's parse does)."""
    lo, hi = _INT_RANGES[t.name]
    if not may_contain(text, ord("x"), ord("X")):  # Arrow alone accepts '0x1F' / '0X1F'
        try:  # fast path: Arrow accepts a subset of Hive's forms (no '+') and refuses out-of-range values at
            # the column's own width, so success is exact; anything else takes the exact path below
            return Converted(pc.cast(text, t.to_arrow()), np.zeros(len(text), dtype=bool))
        except pa.ArrowInvalid:
            pass
    ok = mask(pc.match_substring_regex(text, _INT_RE))
    bad = mask(pc.is_valid(text)) & ~ok
    digits = pc.replace_substring_regex(text, r"^\+", "")
    digits = pc.replace_substring_regex(digits, r"\.[0-9]*$", "")
    digits = pc.replace_substring_regex(digits, r"^-?$", "0")  # '.5' and '-.5' truncate to 0
    digits = pc.replace_substring_regex(digits, r"^(-?)0+([0-9])", r"\1\2")
    short = ok & (np.asarray(pc.fill_null(pc.utf8_length(digits), 0).to_numpy()) <= 18)
    values = np.zeros(len(text), dtype=np.int64)
    if short.any():
        values[short] = pc.cast(digits.filter(pa.array(short)), pa.int64()).to_numpy()
    for i in np.flatnonzero(ok & ~short):
        big = int(digits[i].as_py())
        if lo <= big <= hi:
            values[i] = big
        else:
            bad[i] = True
    bad |= ok & ((values < lo) | (values > hi))
    valid = ok & ~bad
    return Converted(pa.array(np.where(valid, values, 0), mask=~valid).cast(t.to_arrow()), bad)


def _floats(text: pa.Array, t: HiveType) -> Converted:
    """Double.parseDouble / Float.parseFloat: blanks trimmed, NaN, Infinity, f/d suffixes accepted."""
    ok = mask(pc.match_substring_regex(text, _FLOAT_RE))
    bad = mask(pc.is_valid(text)) & ~ok
    norm = pc.replace_substring_regex(pc.utf8_trim_whitespace(text), r"[fFdD]$", "")
    norm = pc.if_else(pa.array(ok), norm, pa.scalar(None, pa.large_string()))
    try:
        doubles = pc.cast(norm, pa.float64())
    except pa.ArrowInvalid:  # out-of-range literal such as 1e400: Java gives ±Infinity, so does float()
        doubles = pa.array([None if s is None else float(s) for s in norm.to_pylist()], pa.float64())
    return Converted(pc.cast(doubles, t.to_arrow(), safe=False), bad)


def _booleans(text: pa.Array, t: HiveType) -> Converted:
    """LazyBoolean: 'true'/'false' in any case; anything else is not a boolean."""
    lower = pc.utf8_lower(text)
    true, false = mask(pc.equal(lower, "true")), mask(pc.equal(lower, "false"))
    bad = mask(pc.is_valid(text)) & ~true & ~false
    return Converted(pa.array(true, mask=~(true | false)), bad)


def _strings(text: pa.Array, t: HiveType) -> Converted:
    """string as is; varchar(n) truncated to n characters; char(n) truncated and trailing blanks dropped."""
    if t.name == "varchar":
        text = pc.utf8_slice_codeunits(text, 0, t.length)
    elif t.name == "char":
        text = pc.utf8_rtrim(pc.utf8_slice_codeunits(text, 0, t.length), " ")
    return Converted(text.cast(pa.string()), np.zeros(len(text), dtype=bool))


def round_decimal(value: decimal.Decimal, t: HiveType) -> decimal.Decimal | None:
    """HiveDecimal.enforcePrecisionScale: round HALF_UP to the scale, None when the integer part overflows."""
    ctx = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)
    rounded = value.quantize(decimal.Decimal(1).scaleb(-t.scale), context=ctx)
    if rounded.adjusted() >= t.precision - t.scale:
        return None
    return rounded


def _decimals(text: pa.Array, t: HiveType) -> Converted:
    ok = mask(pc.match_substring_regex(text, _DECIMAL_RE))
    bad = mask(pc.is_valid(text)) & ~ok
    if not bad.any():
        try:  # bulk: Arrow refuses whatever would need rounding or overflow, which the loop below handles
            return Converted(pc.cast(pc.utf8_trim_whitespace(text), t.to_arrow()), bad)
        except pa.ArrowInvalid:
            pass
    out: list[decimal.Decimal | None] = [None] * len(text)
    for i in np.flatnonzero(ok):
        out[i] = round_decimal(decimal.Decimal(text[i].as_py().strip()), t)
    return Converted(pa.array(out, t.to_arrow()), bad)


def _field_ints(parts: pa.StructArray, name: str, default: int = 0) -> np.ndarray:
    col = parts.field(name)
    col = pc.if_else(pc.equal(col, ""), pa.scalar(None, col.type), col)
    return np.asarray(pc.fill_null(pc.cast(col, pa.int64()), default).to_numpy(), dtype=np.int64)


def _epoch_days(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Days since 1970-01-01 of proleptic Gregorian dates (Hinnant's algorithm) and whether each date exists."""
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    month_days = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    mm = np.clip(m, 1, 12)
    dim = month_days[mm - 1] + (leap & (mm == 2))
    exists = (m >= 1) & (m <= 12) & (d >= 1) & (d <= dim)
    yy = y - (mm <= 2)
    era = yy // 400
    yoe = yy - era * 400
    doy = (153 * ((mm + 9) % 12) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468, exists


def _dates(text: pa.Array, t: HiveType) -> Converted:
    """Date.valueOf: trimmed 'y-M-d' (1-4 digit year, 1-2 digit month/day); a non-digit may follow (a time)."""
    trimmed = pc.utf8_trim_whitespace(text)
    parts = pc.extract_regex(trimmed, _DATE_RE)
    matched = mask(pc.is_valid(parts))
    days, exists = _epoch_days(_field_ints(parts, "y"), _field_ints(parts, "m"), _field_ints(parts, "d"))
    valid = matched & exists
    bad = mask(pc.is_valid(text)) & ~valid
    return Converted(pa.array(np.where(valid, days, 0).astype(np.int32), mask=~valid).cast(pa.date32()), bad)


def _timestamps(text: pa.Array, t: HiveType) -> Converted:
    """Timestamp.valueOf: 'y-M-d[ H:m:s[.f{1,9}]]', else ISO 'yyyy-MM-ddTHH:mm[:ss[.f]]'; a zone suffix is
    dropped (wall clock kept) and LazyTimestamp reads 'NULL' as NULL."""
    text = pc.if_else(pc.equal(text, "NULL"), pa.scalar(None, text.type), text)
    trimmed = pc.utf8_trim_whitespace(text)
    hive, iso = pc.extract_regex(trimmed, _TS_RE), pc.extract_regex(trimmed, _TS_ISO_RE)
    use_hive = mask(pc.is_valid(hive))
    matched = use_hive | mask(pc.is_valid(iso))

    def field(name: str) -> np.ndarray:
        return np.where(use_hive, _field_ints(hive, name), _field_ints(iso, name))

    frac = pc.if_else(pa.array(use_hive), hive.field("f"), iso.field("f"))
    nanos = _field_ints(pa.StructArray.from_arrays([pc.utf8_rpad(frac, 9, "0")], ["f"]), "f")
    hour, minute, second = field("H"), field("M"), field("S")
    days, exists = _epoch_days(field("y"), field("m"), field("d"))
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    in_range = (seconds > -_MAX_TS_SECONDS) & (seconds < _MAX_TS_SECONDS)
    valid = matched & exists & (hour < 24) & (minute < 60) & (second < 60) & in_range
    bad = mask(pc.is_valid(text)) & ~valid
    # TimestampUtils' last resort: anything Date.valueOf reads is that day's midnight. Hive stores it; strict
    # mode still rejects it (the time part was not understood).
    as_date = _dates(pc.if_else(pa.array(bad), text, pa.scalar(None, text.type)), t)
    date_days = np.asarray(pc.fill_null(as_date.values.cast(pa.int32()), 0).to_numpy(), dtype=np.int64)
    fallback = mask(pc.is_valid(as_date.values)) & (np.abs(date_days * 86400) < _MAX_TS_SECONDS)
    seconds = np.where(fallback, date_days * 86400, np.where(valid, seconds, 0))
    ns = seconds * _NS_PER_S + np.where(valid, nanos, 0)
    return Converted(pa.array(ns, mask=~(valid | fallback)).cast(pa.timestamp("ns")), bad)


def decode_binary(raw: bytes) -> bytes:
    """LazyBinary: bytes made only of base64 characters are base64-decoded (leniently), else kept as they are."""
    cleaned = bytes(b for b in raw if b not in b" \t\r\n").replace(b"-", b"+").replace(b"_", b"/")
    cleaned = cleaned.split(b"=", 1)[0]
    usable = cleaned[: len(cleaned) - len(cleaned) % 4 if len(cleaned) % 4 == 1 else len(cleaned)]
    try:
        decoded = base64.b64decode(usable + b"=" * (-len(usable) % 4))
    except binascii.Error:  # pragma: no cover - the alphabet was checked, padding added
        return raw
    return decoded or raw


def _binaries(text: pa.Array, t: HiveType) -> Converted:
    b64 = mask(pc.match_substring_regex(text, _BASE64_RE))
    raw = text.cast(pa.large_binary())
    out = [None if v is None else (decode_binary(v) if b64[i] else v) for i, v in enumerate(raw.to_pylist())]
    return Converted(pa.array(out, pa.binary()), np.zeros(len(text), dtype=bool))


_PRIMITIVE_CONVERTERS: dict[str, Callable[[pa.Array, HiveType], Converted]] = {
    "float": _floats,
    "double": _floats,
    "boolean": _booleans,
    "string": _strings,
    "char": _strings,
    "varchar": _strings,
    "decimal": _decimals,
    "date": _dates,
    "timestamp": _timestamps,
    "binary": _binaries,
}


def _split_items(text: pa.Array, separator: str) -> tuple[pa.Array, np.ndarray]:
    """Items of each collection (an empty text is an empty collection, as in LazyArray/LazyMap)."""
    nonempty = pc.if_else(pc.equal(text, ""), pa.scalar(None, text.type), text)
    parts = pc.split_pattern(nonempty, separator)
    lengths = np.asarray(pc.fill_null(pc.list_value_length(parts), 0).to_numpy(), dtype=np.int64)
    return parts.flatten(), lengths


def _offsets(lengths: np.ndarray) -> pa.Array:
    return pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))


def _parent_bad(child_bad: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    bad = np.zeros(len(lengths), dtype=bool)
    bad[np.repeat(np.arange(len(lengths)), lengths)[child_bad]] = True
    return bad


def _array(text: pa.Array, t: HiveType, fmt: TextFormat, level: int) -> Converted:
    items, lengths = _split_items(text, fmt.separators[level])
    elems = convert(items, t.children[0], fmt, level + 1)
    valid = mask(pc.is_valid(text))
    values = pa.ListArray.from_arrays(_offsets(lengths), elems.values, mask=pa.array(~valid))
    return Converted(values, _parent_bad(elems.bad, lengths))


def _map(text: pa.Array, t: HiveType, fmt: TextFormat, level: int) -> Converted:
    """LazyMap: entries on this level's separator, key and value on the next; first of duplicate keys wins,
    entries with a NULL key are dropped (an unparsable key still marks the value bad)."""
    entries, lengths = _split_items(text, fmt.separators[level])
    kv = pc.split_pattern(entries, fmt.separators[level + 1], max_splits=1)
    keys = convert(pc.list_element(kv, 0), t.children[0], fmt, level + 2)
    has_value = mask(pc.greater(pc.list_value_length(kv), 1))
    value_text = pc.list_element(pc.list_slice(kv, 1, 2), 0) if len(entries) else entries
    value_text = pc.if_else(pa.array(has_value), value_text, pa.scalar(None, pa.large_string()))
    vals = convert(value_text, t.children[1], fmt, level + 2)
    parents = np.repeat(np.arange(len(lengths)), lengths)
    keep = _first_of_each_key(parents, keys.values)
    kept = np.bincount(parents[keep], minlength=len(lengths)).astype(np.int64)
    keep_arr = pa.array(keep)
    valid = mask(pc.is_valid(text))
    values = pa.MapArray.from_arrays(
        _offsets(kept), keys.values.filter(keep_arr), vals.values.filter(keep_arr), mask=pa.array(~valid)
    )
    return Converted(values.cast(t.to_arrow()), _parent_bad(keys.bad | vals.bad, lengths))


def _first_of_each_key(parents: np.ndarray, keys: pa.Array) -> np.ndarray:
    """Mask of the map entries to keep: non-null keys, the first occurrence of each key within its map."""
    keep = mask(pc.is_valid(keys))
    if not keep.any():
        return keep
    positions = np.flatnonzero(keep)
    table = pa.table({"parent": parents[positions], "key": keys.filter(pa.array(keep)), "pos": positions})
    firsts = table.group_by(["parent", "key"], use_threads=False).aggregate([("pos", "min")])
    keep[:] = False
    keep[firsts.column("pos_min").to_numpy()] = True
    return keep


def _struct(text: pa.Array, t: HiveType, fmt: TextFormat, level: int) -> Converted:
    """LazyStruct: fields on this level's separator; missing fields null; extra fields are a bad value."""
    fields, counts = split_fields(text, fmt.separators[level], len(t.children))
    valid = mask(pc.is_valid(text))
    bad = valid & (counts > len(t.children))
    children = []
    for field_text, child in zip(fields, t.children, strict=True):
        conv = convert(field_text, child, fmt, level + 1)
        children.append(conv.values)
        bad |= conv.bad
    arrow = t.to_arrow()
    values = pa.StructArray.from_arrays(children, fields=list(arrow), mask=pa.array(~valid))
    return Converted(values, bad)


# --- partition values: printed back the way Hive's writables print them -------------------------------------


def java_double_str(value: float) -> str:
    """Double.toString: '1.0', '1.0E10', '1.0E-5', 'NaN', 'Infinity'."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    mantissa, exponent = f"{value:.17e}".split("e")
    digits = repr(float(f"{mantissa}e0"))  # shortest mantissa
    mant = digits if "." in digits else digits + ".0"
    return f"{mant}E{int(exponent)}"


def _format_partition(value: object, t: HiveType) -> str | None:
    if value is None:
        return None
    if t.name == "boolean":
        return "true" if value else "false"
    if t.name in ("float", "double"):
        assert isinstance(value, float)
        return java_double_str(value)
    if t.name == "decimal":
        assert isinstance(value, decimal.Decimal)
        text = format(value.normalize(), "f") if value != 0 else "0"
        return text
    if t.name == "timestamp":
        assert isinstance(value, int)  # nanoseconds since the epoch, wall clock
        seconds, nanos = divmod(value, _NS_PER_S)
        m = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
        text = f"{m.year:04d}-{m.month:02d}-{m.day:02d} {m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        return text + f".{nanos:09d}".rstrip("0") if nanos else text  # Timestamp.toString: no trailing zeros
    if t.name == "date":
        assert isinstance(value, dt.date)
        return value.isoformat()
    if t.name == "binary":
        assert isinstance(value, bytes)
        return value.decode("utf-8", "replace") or None
    return str(value) or None


def canonical_partition_values(values: pa.Array, t: HiveType) -> pa.DictionaryArray:
    """Typed partition values → the strings Hive derives partition names from (null and '' → null), kept
    dictionary-encoded: each distinct value is formatted once, and the router groups rows by the codes."""
    if t.name == "timestamp":
        values = values.cast(pa.int64())
    encoded = values.dictionary_encode()
    strings = [_format_partition(v, t) for v in encoded.dictionary.to_pylist()]
    return pa.DictionaryArray.from_arrays(encoded.indices, pa.array(strings, pa.string()))

"""Every readable record of a damaged mcap file (no summary, a cut or garbled last chunk), in file order.

A killed recorder leaves complete chunks and a last chunk cut anywhere; mcap's `StreamReader` reads the
complete ones, and its record reader, run over the bytes of a cut (uncompressed or zstd) chunk, gives every
record that is whole. `repair` writes what this yields into a new bag.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from pathlib import Path

MAGIC = b"\x89MCAP0\r\n"
_CHUNK_OPCODE = 0x06


def _records(raw: bytes) -> tuple[list, int, str]:
    """The complete records at the start of a chunk's (uncompressed) record bytes: (records, bytes, error)."""
    from mcap.stream_reader import StreamReader

    stream = io.BytesIO(raw)
    reader = iter(StreamReader(stream, skip_magic=True, record_size_limit=len(raw) + 1).records)
    out, used = [], 0
    while used < len(raw):
        try:
            out.append(next(reader))
        except StopIteration:
            break
        except Exception as exc:  # the cut (or damaged) record ends the usable part
            return out, used, f"{type(exc).__name__}: {exc}"
        used = stream.tell()
    return out, used, ""


def _cut_chunk(tail: bytes) -> tuple[list, int, str]:
    """The complete records inside a chunk cut short: `tail` starts at the chunk's opcode.

    Returns (records, bytes of `tail` they span (all of it when compressed), what happened)."""
    header = 1 + 8 + 8 + 8 + 8 + 4
    if tail[:1] and tail[0] != _CHUNK_OPCODE:
        return [], 0, f"the file ends inside a record (opcode 0x{tail[0]:02x}) that is not a chunk"
    if len(tail) < header + 4:
        return [], 0, "the file ends inside a chunk header"
    (name_len,) = struct.unpack_from("<I", tail, header)
    start = header + 4 + name_len + 8
    if len(tail) < start:
        return [], 0, "the file ends inside a chunk header"
    compression = tail[header + 4 : header + 4 + name_len].decode(errors="replace")
    body = tail[start:]
    if compression == "":
        records, used, _ = _records(body)
        return (
            records,
            start + used if records else 0,
            f"the last chunk is cut: {len(records)} complete records recovered from it",
        )
    if compression == "zstd":
        import zstandard

        try:
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        except zstandard.ZstdError as exc:
            return [], 0, f"the cut zstd chunk does not decompress: {exc}"
        records, _, _ = _records(raw)
        return (
            records,
            len(tail) if records else 0,
            (f"the last (zstd) chunk is cut: {len(records)} complete records recovered from it"),
        )
    return [], 0, f"a cut {compression} chunk cannot be read record by record"


def _chunk_bytes(chunk) -> bytes:
    from mcap.stream_reader import get_chunk_data_stream

    try:
        stream, size = get_chunk_data_stream(chunk)
        return stream.read(size)
    except Exception:
        return chunk.data if chunk.compression == "" else b""


def mcap_records(src_file: Path) -> tuple[Iterator, dict]:
    """Every readable record of a summary-less mcap, in file order; `status` holds what was lost."""
    from mcap.records import Chunk
    from mcap.stream_reader import StreamReader, breakup_chunk

    status = {"good_offset": 0, "note": ""}

    def walk() -> Iterator:
        with src_file.open("rb") as stream:
            if stream.read(8) != MAGIC:
                status["note"] = "the file does not start with the mcap magic"
                return
            reader = iter(
                StreamReader(
                    stream, skip_magic=True, emit_chunks=True, record_size_limit=max(src_file.stat().st_size, 1)
                ).records
            )
            status["good_offset"] = stream.tell()
            while True:
                try:
                    record = next(reader)
                except StopIteration:
                    return
                except Exception as exc:  # the torn tail of a killed recording
                    stream.seek(status["good_offset"])
                    records, used, note = _cut_chunk(stream.read())
                    status["note"] = note or f"stopped at the damaged tail: {type(exc).__name__}"
                    status["good_offset"] += used
                    yield from records
                    return
                status["good_offset"] = stream.tell()
                if isinstance(record, Chunk):
                    try:
                        yield from breakup_chunk(record)
                    except Exception:  # garbage inside a complete chunk: its readable prefix
                        records, _, err = _records(_chunk_bytes(record))
                        status["note"] = f"a damaged chunk ({err}): {len(records)} records kept from it"
                        status["damaged_chunks"] = status.get("damaged_chunks", 0) + 1
                        yield from records
                else:
                    yield record

    return walk(), status

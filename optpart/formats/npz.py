"""A columnar binary format for big problems: ``.npz``, numpy arrays in a zip file.

Each column is one numpy array (``numpy.lib.format``, read with ``allow_pickle=False``, so
a file can hold no code) instead of one JSON object per node and edge; ``docs/formats.md``
lists the members.

The writer is deterministic (fixed member order and zip timestamps, no compression:
the arrays are written and read at disk speed). Every member is checked (name, dtype,
shape, offsets) before use, and the total uncompressed size against
:func:`optpart.limits.max_input_bytes` before anything is loaded.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..limits import max_input_bytes
from ..model.constraints import Constraints
from ..model.problem import Problem
from ._io import parse_json

__all__ = ["NPZ_FORMAT", "read_npz", "write_npz"]

NPZ_FORMAT = "optpart-problem-npz"
VERSION = 1
_FLOAT_COLUMNS = ("time", "memory", "param_bytes", "output_bytes", "temp_bytes", "edge_bytes")
_INT_COLUMNS = ("node_id_offsets", "edge_src", "edge_dst", "colocate_members", "colocate_offsets", "topo")
_BYTE_COLUMNS = ("header", "node_id_bytes", "node_meta")
_KNOWN = frozenset(_FLOAT_COLUMNS + _INT_COLUMNS + _BYTE_COLUMNS)
_REQUIRED = ("header", "node_id_bytes", "node_id_offsets", "time", "memory", "edge_src", "edge_dst", "edge_bytes")
_DATE = (1980, 1, 1, 0, 0, 0)


# ---------------------------------------------------------------------- writing
def _json_bytes(x: Any) -> bytes:
    return json.dumps(x, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def write_npz(problem: Problem, path: str | Path) -> None:
    """Write ``problem`` as an optpart ``.npz`` file (deterministic bytes).

    Parameters
    ----------
    problem : Problem
        The problem.
    path : str or pathlib.Path
        The file to write.
    """
    from .optpart_json import _num, links_to_dict

    encoded = [s.encode("utf-8") for s in problem.node_ids]
    offsets = np.zeros(problem.n_nodes + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    c = problem.constraints
    header: dict[str, Any] = {"format": NPZ_FORMAT, "version": VERSION, "name": problem.name}
    if problem.n_devices:
        header["devices"] = [{"id": d.id, "memory": _num(d.memory), "speed": d.speed} for d in problem.devices]
    if problem.links is not None:
        header["links"] = links_to_dict(problem.links)
    if c.pin:
        header["pin"] = dict(c.pin)
    if c.forbid:
        header["forbid"] = {k: list(v) for k, v in c.forbid.items()}
    if problem.meta:
        header["meta"] = problem.meta
    members: list[tuple[str, np.ndarray]] = [
        ("header", np.frombuffer(_json_bytes(header), dtype=np.uint8)),
        ("node_id_bytes", np.frombuffer(b"".join(encoded), dtype=np.uint8)),
        ("node_id_offsets", offsets),
        ("time", problem.time), ("memory", problem.memory),
    ]
    if problem.has_split:
        members += [("param_bytes", problem.param_bytes), ("output_bytes", problem.output_bytes),
                    ("temp_bytes", problem.temp_bytes)]
    members += [("edge_src", problem.edge_src), ("edge_dst", problem.edge_dst), ("edge_bytes", problem.edge_bytes),
                ("topo", problem.topo)]
    if c.colocate:
        index = problem.node_index
        flat = np.fromiter((index[nid] for g in c.colocate for nid in g), dtype=np.int64)
        goff = np.zeros(len(c.colocate) + 1, dtype=np.int64)
        np.cumsum([len(g) for g in c.colocate], out=goff[1:])
        members += [("colocate_members", flat), ("colocate_offsets", goff)]
    if problem.node_meta is not None:
        members.append(("node_meta", np.frombuffer(_json_bytes(problem.node_meta), dtype=np.uint8)))
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, arr in members:
                info = zipfile.ZipInfo(name + ".npy", date_time=_DATE)
                info.external_attr = 0o644 << 16
                with zf.open(info, "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.ascontiguousarray(arr), allow_pickle=False)
    except OSError as exc:
        raise FormatError(f"cannot write {path}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------- reading
def _members(path: Path) -> dict[str, np.ndarray]:
    limit = max_input_bytes()
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            total = sum(i.file_size for i in infos)
            if total > limit:
                raise FormatError(f"{path} holds {total} bytes uncompressed, more than the input limit of "
                                  f"{limit} bytes (set OPTPART_MAX_INPUT_BYTES to raise it)")
            out: dict[str, np.ndarray] = {}
            for info in infos:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if name not in _KNOWN:
                    raise FormatError(f"{path}: unknown member '{info.filename}'; see docs/formats.md")
                if name in out:
                    raise FormatError(f"{path}: member '{info.filename}' appears twice")
                with zf.open(info) as fh:
                    raw = fh.read(limit + 1)
                out[name] = _array(path, info.filename, raw)
    except zipfile.BadZipFile as exc:
        raise FormatError(f"{path}: not a valid .npz (zip) file ({exc})") from None
    except (zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
        raise FormatError(f"{path}: cannot read this zip file ({exc})") from None
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    missing = [m for m in _REQUIRED if m not in out]
    if missing:
        raise FormatError(f"{path}: missing member '{missing[0]}.npy'; see docs/formats.md")
    return out


def _array(path: Path, member: str, raw: bytes) -> np.ndarray:
    """One ``.npy`` member, its header checked before any allocation: a plain dtype (no
    objects), and no more elements than its bytes hold."""
    fmt = np.lib.format
    data = io.BytesIO(raw)
    try:
        version = fmt.read_magic(data)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(data)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(data)
        else:
            raise ValueError(f"npy version {version}")
        if dtype.hasobject:
            raise ValueError(f"dtype {dtype} holds Python objects")
        count = int(np.prod(shape, dtype=object)) if shape else 1
        if count * dtype.itemsize > len(raw):
            raise ValueError(f"header declares {count} elements of {dtype} but the member holds {len(raw)} bytes")
        if not fortran and len(raw) - data.tell() == count * dtype.itemsize:
            # a read-only view of the member's bytes: no second copy of 10^6-element columns
            return np.frombuffer(raw, dtype=dtype, count=count, offset=data.tell()).reshape(shape)
        data.seek(0)
        return fmt.read_array(data, allow_pickle=False)
    except (ValueError, OSError, EOFError, TypeError) as exc:
        raise FormatError(f"{path}: member '{member}' is not a valid numpy array ({exc})") from None


def _column(path: Path, arrays: dict[str, np.ndarray], name: str, length: int | None) -> np.ndarray:
    arr = arrays[name]
    if arr.ndim != 1:
        raise FormatError(f"{path}: member '{name}' has shape {arr.shape}; expected one dimension")
    if length is not None and arr.shape[0] != length:
        raise FormatError(f"{path}: member '{name}' has {arr.shape[0]} entries, expected {length}")
    if name in _FLOAT_COLUMNS and arr.dtype != np.float64:
        raise FormatError(f"{path}: member '{name}' has dtype {arr.dtype}; expected float64")
    if name in _INT_COLUMNS and arr.dtype != np.int64:
        raise FormatError(f"{path}: member '{name}' has dtype {arr.dtype}; expected int64")
    if name in _BYTE_COLUMNS and arr.dtype != np.uint8:
        raise FormatError(f"{path}: member '{name}' has dtype {arr.dtype}; expected uint8")
    return arr


def _offsets(path: Path, name: str, off: np.ndarray, total: int) -> None:
    if off.size == 0 or off[0] != 0 or off[-1] != total or (np.diff(off) < 0).any():
        raise FormatError(f"{path}: member '{name}' must rise from 0 to {total}")


def _node_ids(path: Path, blob: np.ndarray, off: np.ndarray) -> list[str]:
    raw = blob.tobytes()
    bounds = off.tolist()
    try:
        if not raw or int(blob.max()) < 128:  # ASCII: byte offsets are character offsets
            text = raw.decode("ascii")
            return [text[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        return [raw[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: node ids are not UTF-8 ({exc.reason})") from None


def read_npz(path: str | Path) -> Problem:
    """Read a problem written by :func:`write_npz`.

    Parameters
    ----------
    path : str or pathlib.Path
        The ``.npz`` file: a zip of ``.npy`` columns and a JSON header (docs/formats.md).

    Returns
    -------
    Problem
        Equal to the problem written; the stored topological order is verified, not trusted.

    Raises
    ------
    FormatError
        Naming a missing, unknown or malformed member, or an edited topological order.
    """
    from ..model.records import read_constraints, read_devices, read_links

    path = Path(path)
    if not path.exists():
        raise FormatError(f"no such file: {path}")
    arrays = _members(path)
    header = parse_json(_column(path, arrays, "header", None).tobytes(), f"{path} (member 'header')")
    if not isinstance(header, dict) or header.get("format") != NPZ_FORMAT:
        raise FormatError(f"{path}: member 'header' must say \"format\": \"{NPZ_FORMAT}\"")
    version = header.get("version")
    if isinstance(version, bool) or version != VERSION:
        raise FormatError(f"{path}: unsupported {NPZ_FORMAT} version {version!r}; this optpart reads {VERSION}")
    unknown = set(header) - {"format", "version", "name", "devices", "links", "pin", "forbid", "meta"}
    if unknown:
        raise FormatError(f"{path}: unknown header field(s) {sorted(unknown)}")
    blob = _column(path, arrays, "node_id_bytes", None)
    off = _column(path, arrays, "node_id_offsets", None)
    _offsets(path, "node_id_offsets", off, blob.size)
    n = off.size - 1
    ids = _node_ids(path, blob, off)
    cols = {name: _column(path, arrays, name, n) for name in ("time", "memory")}
    split = {name: _column(path, arrays, name, n) for name in ("param_bytes", "output_bytes", "temp_bytes")
             if name in arrays}
    src = _column(path, arrays, "edge_src", None)
    m = src.size
    dst = _column(path, arrays, "edge_dst", m)
    ebytes = _column(path, arrays, "edge_bytes", m)
    colocate: tuple[tuple[str, ...], ...] = ()
    if ("colocate_members" in arrays) != ("colocate_offsets" in arrays):
        raise FormatError(f"{path}: members 'colocate_members' and 'colocate_offsets' go together")
    if "colocate_members" in arrays:
        members = _column(path, arrays, "colocate_members", None)
        goff = _column(path, arrays, "colocate_offsets", None)
        _offsets(path, "colocate_offsets", goff, members.size)
        if members.size and (members.min() < 0 or members.max() >= n):
            raise FormatError(f"{path}: member 'colocate_members' holds a node index outside 0..{n - 1}")
        names = [ids[j] for j in members.tolist()]
        b = goff.tolist()
        colocate = tuple(tuple(names[b[i]:b[i + 1]]) for i in range(len(b) - 1))
    node_meta = None
    if "node_meta" in arrays:
        node_meta = parse_json(_column(path, arrays, "node_meta", None).tobytes(), f"{path} (member 'node_meta')")
        if not isinstance(node_meta, list) or len(node_meta) != n or set(map(type, node_meta)) - {dict}:
            raise FormatError(f"{path}: member 'node_meta' must be a JSON list of {n} objects")
    devices = read_devices(header["devices"]) if "devices" in header else None
    links = read_links(header["links"]) if "links" in header else None
    cons = read_constraints({k: header[k] for k in ("pin", "forbid") if k in header})
    constraints = Constraints(pin=cons.pin, colocate=colocate, forbid=cons.forbid)
    name = header.get("name", path.name[:-4])
    meta = header.get("meta", {})
    if not isinstance(name, str) or not isinstance(meta, dict):
        raise FormatError(f"{path}: header 'name' must be a string and 'meta' an object")
    topo = _column(path, arrays, "topo", n) if "topo" in arrays else None
    # ids and node_meta are fresh lists: no copy; a stored order is checked, not trusted
    return Problem.from_arrays(ids, cols["time"], cols["memory"], src, dst, ebytes, devices=devices, links=links,
                               constraints=constraints, param_bytes=split.get("param_bytes"),
                               output_bytes=split.get("output_bytes"), temp_bytes=split.get("temp_bytes"),
                               node_meta=node_meta, name=name, meta=meta, topo=topo, copy=False)

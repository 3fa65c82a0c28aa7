"""Devices and links: the one resolver of device and link values.

Everything that turns values into devices goes through here: ``Device``/``Links`` objects
(:func:`device_table`, :func:`link_matrices`), ``Problem.with_devices(4, memory="8GiB")``
(:func:`devices_from_values`), and ``optpart solve --devices 4 --memory 16GiB`` /
``optpart bench`` (:func:`resolve_devices`). One rule for every value:

* a count is a whole number >= 1 within :func:`optpart.limits.max_devices`
  (:func:`device_count`); devices it creates are named ``dev<i>``;
* ``memory``/``speed``/... are one value for every device, a per-device list (a list, a
  tuple, an array or a comma list ``"80GiB,80GiB,40GiB"`` of exactly ``K`` values) or a
  ``{device id: value}`` mapping (:func:`per_device`); values may be unit strings
  (:mod:`optpart.units`); speeds are finite numbers > 0, never booleans.

:func:`resolve_devices` adds the rules for a graph that already has devices (docs/formats.md):

* ``devices=K`` sets the count; the file's devices keep their ids (pins and link
  overrides name them), extra ones are named ``dev<i>``; without ``devices`` a per-device
  list of ``memory`` (else ``speed``) gives the count, which must then equal the file's;
  else the file's count is kept, and a graph without devices is an error.
* a device a mapping leaves out keeps the file's value; a new device it leaves out is
  an error. Left out entirely, each file device keeps its own value; new devices get the
  file's smallest capacity (unlimited when the file has no devices) and speed 1.
* ``bandwidth``/``latency``: the uniform link. Left out, the file's links stay; when
  the file has none, the defaults are :data:`DEFAULT_BANDWIDTH` and :data:`DEFAULT_LATENCY`.
  Per-pair overrides of the file are kept, except those naming a device that is no
  longer there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import OptpartError, ProblemError
from ..limits import check_devices
from ..units import parse_bandwidth, parse_bytes, parse_speed, parse_time
from .columns import short

if TYPE_CHECKING:
    from .problem import Problem

__all__ = ["Device", "LinkOverride", "Links", "DEFAULT_BANDWIDTH", "DEFAULT_LATENCY", "default_links",
           "device_count", "per_device", "devices_from_values", "device_list", "device_table", "link_matrices",
           "check_path_bounds", "resolve_devices", "with_resolved_devices"]

#: Links used when neither the file nor the caller gives any.
DEFAULT_BANDWIDTH = "25GB/s"
DEFAULT_LATENCY = "10us"

Value = Any  # a number, a unit string, a comma list, a sequence, or a {device id: value} mapping


@dataclass(frozen=True)
class Device:
    """One accelerator: its memory capacity in bytes and its relative speed."""

    id: str
    memory: float = math.inf
    speed: float = 1.0


@dataclass(frozen=True)
class LinkOverride:
    """Latency (s) and bandwidth (bytes/s) between two devices, overriding the uniform link.

    An override applies in both directions unless the reverse pair has its own override.
    """

    src: str
    dst: str
    latency: float
    bandwidth: float


@dataclass(frozen=True)
class Links:
    """Uniform link (latency in s, bandwidth in bytes/s) plus per-pair overrides.

    The default, zero latency and infinite bandwidth, makes communication free.
    """

    latency: float = 0.0
    bandwidth: float = math.inf
    pairs: tuple[LinkOverride, ...] = ()


def default_links() -> Links:
    """The links of a graph that names none: :data:`DEFAULT_LATENCY`, :data:`DEFAULT_BANDWIDTH`.

    Returns
    -------
    Links
    """
    return Links(parse_time(DEFAULT_LATENCY), parse_bandwidth(DEFAULT_BANDWIDTH))


def _speed(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, int, float, np.integer, np.floating)):
        raise OptpartError(f"speed {value!r} must be a positive finite number")
    return parse_speed(value)


def _named(name: str, parse: Callable[[Any], float], raw: Any) -> float:
    try:
        return parse(raw)
    except OptpartError as exc:
        raise ProblemError(f"{name}: {exc}") from None


def device_count(devices: Any) -> int:
    """``devices`` as a device count: a whole number >= 1 within the device limit.

    Parameters
    ----------
    devices : int
        The count asked for (an integral float is accepted, a bool is not).

    Returns
    -------
    int
        The count.
    """
    if isinstance(devices, (bool, np.bool_)) or not isinstance(devices, (int, np.integer)):
        try:
            as_int = int(devices)
        except (TypeError, ValueError, OverflowError):
            raise ProblemError(f"devices {devices!r} must be a whole number >= 1") from None
        if isinstance(devices, (bool, np.bool_)) or as_int != devices:
            raise ProblemError(f"devices {devices!r} must be a whole number >= 1")
        devices = as_int
    devices = int(devices)
    if devices < 1:
        raise ProblemError(f"devices {devices} must be at least 1")
    check_devices(devices, "devices")
    return devices


def _items(name: str, value: Value) -> list[Any]:
    """A scalar, list, tuple, array or comma list as its items."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, str):
        items: list[Any] = [x.strip() for x in value.split(",")]
        if len(items) > 1 and any(x == "" for x in items):
            raise ProblemError(f"{name} {value!r} has an empty item")
        return items
    if isinstance(value, (list, tuple)):
        if not value:
            raise ProblemError(f"{name} gives no value")
        return list(value)
    return [value]


def list_length(value: Value) -> int:
    """The device count a per-device list implies (``"80GiB,40GiB"`` -> 2), or 0 for one value.

    Parameters
    ----------
    value : scalar, sequence, comma list or mapping
        A per-device value.

    Returns
    -------
    int
    """
    if isinstance(value, Mapping) or value is None:
        return 0
    n = len(_items("value", value))
    return n if n > 1 else 0


def per_device(name: str, value: Value, parse: Callable[[Any], float], ids: Sequence[str],
               own: Sequence[float | None]) -> list[float]:
    """One float per device from a scalar, a list, a comma list or a mapping.

    Parameters
    ----------
    name : str
        The parameter (``"memory"``), for messages.
    value : scalar, sequence, comma list or mapping
        The values given.
    parse : callable
        Parses one value (:func:`optpart.units.parse_bytes`, ...).
    ids : sequence of str
        The device ids, in order.
    own : sequence of float or None
        Each device's value when a mapping leaves it out (None: it must be named).

    Returns
    -------
    list of float
        One parsed value per device, in ``ids`` order.
    """
    k = len(ids)
    if isinstance(value, Mapping):
        index = {d: i for i, d in enumerate(ids)}
        out = list(own)
        for key, raw in value.items():
            if str(key) not in index:
                raise ProblemError(f"{name} names unknown device {str(key)!r}; devices: {', '.join(ids)}")
            out[index[str(key)]] = _named(name, parse, raw)
        missing = [ids[i] for i, x in enumerate(out) if x is None]
        if missing:
            raise ProblemError(f"{name} gives no value for new device '{missing[0]}'")
        return [float(x) for x in out]  # type: ignore[arg-type]
    values = [_named(name, parse, x) for x in _items(name, value)]
    if len(values) == 1:
        return values * k
    if len(values) != k:
        raise ProblemError(f"{name} gives {len(values)} values for {k} devices")
    return values


def devices_from_values(devices: Any, memory: Value = math.inf, speed: Value = 1.0) -> list[Device]:
    """Devices from a count or ids plus per-device ``memory``/``speed`` (see the module doc).

    Parameters
    ----------
    devices : int, sequence of str or None
        The count or the ids; None takes the ids from a mapping, or the count from a list.
    memory : value, optional
        Capacity per device (bytes or sizes such as ``"16GiB"``); unlimited by default.
    speed : value, optional
        Relative speed per device (> 0); 1 by default.

    Returns
    -------
    list of Device
    """
    names: list[str] | None = None
    count: int | None = None
    if devices is not None:
        if isinstance(devices, (int, np.integer, float, np.bool_)):  # device_count refuses a bool
            count = device_count(devices)
        else:
            names = [str(d) for d in devices]
            count = device_count(len(names)) if names else device_count(0)
    for what, value in (("memory", memory), ("speed", speed)):
        if isinstance(value, Mapping):
            keys = [str(k) for k in value]
            if names is None and (count is None or count == len(keys)):
                names, count = keys, device_count(len(keys))
            # else the devices are dev<i>: per_device names the unknown or the missing one
        elif count is None and list_length(value):
            count = device_count(list_length(value))
    if count is None:
        raise ProblemError("give the devices: a count, a list of ids, or memory/speed per device")
    names = names or [f"dev{i}" for i in range(count)]
    none = [None] * count
    mem = per_device("memory", memory, parse_bytes, names, none)
    spd = per_device("speed", speed, _speed, names, none)
    return [Device(n, m, s) for n, m, s in zip(names, mem, spd)]


def device_list(devices: Any, memory: Value = math.inf, speed: Value = 1.0) -> list[Device]:
    """What ``Problem.with_devices`` was given, as devices: :class:`Device` objects as they
    are, a count or ids through :func:`devices_from_values`.

    Parameters
    ----------
    devices : int, sequence of str, sequence of Device or None
        The devices asked for.
    memory, speed : value
        Per-device values (with a count or ids only).

    Returns
    -------
    list of Device
    """
    if devices is not None and not isinstance(devices, (str, bytes)) and isinstance(devices, Sequence) \
            and devices and all(isinstance(d, Device) for d in devices):
        if not (_is_value(memory, math.inf) and _is_value(speed, 1.0)):
            raise ProblemError("give memory= and speed= either inside the Device objects or with a device "
                               "count/ids, not both")
        return list(devices)
    if devices is None or isinstance(devices, (int, np.integer)) or \
            (isinstance(devices, Sequence) and not isinstance(devices, str)
             and devices and all(isinstance(d, str) for d in devices)):
        return devices_from_values(devices, memory, speed)
    raise ProblemError(f"devices={devices!r} must be a count, a list of device ids or a list of Device")


def _is_value(value: Any, default: float) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and float(value) == default


def device_table(devices: Sequence[Device], n_nodes: int) -> tuple[tuple[Device, ...], list[str], dict[str, int]]:
    """Checked devices: ``(devices, ids, {id: index})``; memory >= 0, speed finite > 0.

    Parameters
    ----------
    devices : sequence of Device
        The devices, in index order.
    n_nodes : int
        The node count (``n x k`` tables are bounded by :func:`optpart.limits.check_cells`).

    Returns
    -------
    tuple
        ``(devices, ids, {id: index})``.
    """
    from ..limits import check_cells

    devices = tuple(devices)
    check_devices(len(devices))
    check_cells(n_nodes, len(devices))
    index: dict[str, int] = {}
    for i, d in enumerate(devices):
        if not isinstance(d, Device):
            raise ProblemError(f"devices must be Device objects, got {short(d)}")
        for what in ("memory", "speed"):
            x = getattr(d, what)
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise ProblemError(f"device '{d.id}' has {what}={short(x)}; it must be a number")
            if isinstance(x, int) and abs(x) > 1.7e308:
                raise ProblemError(f"device '{d.id}' has {what}={short(x)}; it is beyond the float range")
        if d.id in index:
            raise ProblemError(f"duplicate device id '{d.id}'")
        index[d.id] = i
        if not (d.memory >= 0) or math.isnan(d.memory):
            raise ProblemError(f"device '{d.id}' has memory={d.memory!r}; it must be >= 0")
        if not (0 < d.speed < math.inf):
            raise ProblemError(f"device '{d.id}' has speed={d.speed!r}; it must be a finite number > 0")
    return devices, [d.id for d in devices], index


def _check_link(latency: float, bandwidth: float, what: str) -> None:
    if not (0 <= latency < math.inf):
        raise ProblemError(f"{what} has latency={latency!r}; it must be a finite number >= 0")
    if not (bandwidth > 0) or math.isnan(bandwidth):
        raise ProblemError(f"{what} has bandwidth={bandwidth!r}; it must be > 0 (inf for free transfers)")


def link_matrices(links: Links | None, device_index: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """``k x k`` latency and bandwidth matrices: the uniform link, then each override
    (both directions unless the reverse pair has its own); 0 and inf on the diagonal.

    Parameters
    ----------
    links : Links or None
        None (a problem that names no links) means the default links, :func:`default_links`.
    device_index : mapping
        Device id to index.

    Returns
    -------
    tuple of numpy.ndarray
        ``(latency, bandwidth)``, each ``k x k`` float64 (seconds, bytes/s).
    """
    k = len(device_index)
    lk = links if links is not None else default_links()
    _check_link(lk.latency, lk.bandwidth, "links")
    lat = np.full((k, k), float(lk.latency))
    bw = np.full((k, k), float(lk.bandwidth))
    explicit: set[tuple[int, int]] = set()
    for o in lk.pairs:
        for end in (o.src, o.dst):
            if end not in device_index:
                raise ProblemError(f"link override '{o.src}' -> '{o.dst}' names unknown device '{end}'")
        a, b = device_index[o.src], device_index[o.dst]
        if a == b:
            raise ProblemError(f"link override '{o.src}' -> '{o.dst}' joins a device to itself")
        _check_link(o.latency, o.bandwidth, f"link override '{o.src}' -> '{o.dst}'")
        lat[a, b], bw[a, b] = o.latency, o.bandwidth
        explicit.add((a, b))
        if (b, a) not in explicit:
            lat[b, a], bw[b, a] = o.latency, o.bandwidth
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, math.inf)
    return lat, bw


def check_path_bounds(time: np.ndarray, edge_bytes: np.ndarray, speed: np.ndarray, latency: np.ndarray,
                      bandwidth: np.ndarray) -> None:
    """Refuse devices and links under which a schedule's length can overflow to inf.

    Any schedule is at most the sum of all run times on the slowest device plus all
    transfers over the slowest link; when that bound is finite, no start, finish or
    makespan the evaluator computes can become inf or NaN.

    Parameters
    ----------
    time, edge_bytes : numpy.ndarray
        Node times and edge bytes.
    speed : numpy.ndarray
        Device speeds.
    latency, bandwidth : numpy.ndarray
        The ``k x k`` link matrices.
    """
    if speed.size == 0:
        return
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        run = float(time.sum()) / float(speed.min())
        off = ~np.eye(speed.size, dtype=bool)
        comm = 0.0
        if edge_bytes.size and off.any():
            comm = (float(latency[off].max()) * edge_bytes.size
                    + float(edge_bytes.sum()) / float(bandwidth[off].min()))
    if not math.isfinite(run):
        raise ProblemError(f"the node times sum to {float(time.sum())!r} s, which on the slowest device "
                           f"(speed {float(speed.min())!r}) overflows the float range")
    if not math.isfinite(run + comm):
        raise ProblemError(f"a schedule's length can overflow the float range: the edges carry "
                           f"{float(edge_bytes.sum())!r} bytes in total over links as slow as "
                           f"{float(bandwidth[off].min())!r} bytes/s")


def resolve_devices(problem: "Problem", *, devices: int | None = None, memory: Value = None,
                    speed: Value = None, bandwidth: Value = None, latency: Value = None
                    ) -> tuple[tuple[Device, ...], Links | None]:
    """The devices and links asked for, from a graph's own and the given values (rules in the
    module docstring). :meth:`Problem.with_devices` puts a problem on them.

    Parameters
    ----------
    problem : Problem
        The graph, with or without devices.
    devices : int, optional
        Device count ``K``.
    memory : value, optional
        Capacity per device (bytes or a size such as ``"16GiB"``).
    speed : value, optional
        Relative speed per device (> 0).
    bandwidth : value, optional
        Uniform link bandwidth (bytes/s or e.g. ``"25GB/s"``).
    latency : value, optional
        Uniform link latency (s or e.g. ``"10us"``).

    Returns
    -------
    (tuple of Device, Links or None)
        The devices, and the links (``problem.links`` itself, possibly ``None``: the default
        links, when no link value is given).

    Raises
    ------
    OptpartError
        Naming the parameter and the value: a bad unit, sign, range or count, a
        device count above :func:`optpart.limits.max_devices`, or a graph without devices.

    Examples
    --------
    >>> from optpart import Problem
    >>> p = Problem.build(nodes=[{"id": "a", "time": 1.0, "memory": 10}])
    >>> devs, links = resolve_devices(p, devices=2, memory="1KiB,2KiB", bandwidth="25GB/s")
    >>> [d.id for d in devs], [d.memory for d in devs], links.bandwidth
    (['dev0', 'dev1'], [1024.0, 2048.0], 25000000000.0)
    """
    links = problem.links
    if bandwidth is not None or latency is not None:
        base = links if links is not None else default_links()
        links = Links(_named("latency", parse_time, latency) if latency is not None else base.latency,
                      _named("bandwidth", parse_bandwidth, bandwidth) if bandwidth is not None
                      else base.bandwidth, base.pairs)
    if devices is None and memory is None and speed is None:
        if problem.n_devices == 0:
            raise ProblemError(f"'{problem.name}' has no devices; give their number (--devices K) and "
                               "capacity (--memory SIZE)")
        return tuple(problem.devices), links
    if problem.n_devices == 0 and (devices is not None or isinstance(memory, Mapping) or isinstance(speed, Mapping)
                                   or list_length(memory) or list_length(speed)):
        # nothing to keep: the rule of Problem.with_devices, one resolver for both
        return tuple(devices_from_values(devices, math.inf if memory is None else memory,
                                         1.0 if speed is None else speed)), links
    k = device_count(devices) if devices is not None else (list_length(memory) or list_length(speed)
                                                           or problem.n_devices)
    if devices is None and problem.n_devices and k != problem.n_devices:
        # A per-device list that disagrees with the file's devices: never add or drop
        # devices silently; a different count must be asked for.
        flag = "memory" if list_length(memory) else "speed"
        raise ProblemError(f"{flag} gives {k} values but '{problem.name}' has {problem.n_devices} devices "
                           f"({', '.join(problem.device_ids)}); give one value per device, or --devices {k} "
                           "to change the count")
    if k == 0:
        raise ProblemError(f"'{problem.name}' has no devices; give their number (--devices K)")
    old = problem.devices
    ids = [old[i].id if i < len(old) else f"dev{i}" for i in range(k)]
    if memory is not None:
        caps = per_device("memory", memory, parse_bytes, ids, [old[i].memory if i < len(old) else None
                                                                 for i in range(k)])
    else:
        fallback = float(problem.device_memory.min()) if problem.n_devices else math.inf
        caps = [old[i].memory if i < len(old) else fallback for i in range(k)]
    own_speed = [old[i].speed if i < len(old) else None for i in range(k)]
    if speed is not None:
        speeds = per_device("speed", speed, _speed, ids, own_speed)
    else:
        speeds = [s if s is not None else 1.0 for s in own_speed]
    new = tuple(Device(ids[i], caps[i], speeds[i]) for i in range(k))
    if links is not None and len(old) > k:
        kept = set(ids)
        links = Links(links.latency, links.bandwidth,
                      tuple(o for o in links.pairs if o.src in kept and o.dst in kept))
    return new, links


def with_resolved_devices(problem: "Problem", **values: Value) -> "Problem":
    """``problem`` on the devices and links ``values`` ask for (:func:`resolve_devices`'s rules).

    Parameters
    ----------
    problem : Problem
        The graph, with or without devices.
    **values
        ``devices``, ``memory``, ``speed``, ``bandwidth``, ``latency``, as :func:`resolve_devices`
        takes them.

    Returns
    -------
    Problem
        ``problem`` itself when the values leave its devices and links as they are.
    """
    devices, links = resolve_devices(problem, **values)
    if list(devices) == list(problem.devices) and links is problem.links:
        return problem
    return problem.with_devices(list(devices), links=links, constraints=problem.constraints)


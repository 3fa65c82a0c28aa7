"""Old home of the device resolver: re-exports :mod:`optpart.model.devices` (kept for one release)."""

from .model.devices import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, resolve_devices

__all__ = ["resolve_devices", "DEFAULT_BANDWIDTH", "DEFAULT_LATENCY"]

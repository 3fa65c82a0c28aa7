"""The exact solvers ``cpsat`` (OR-Tools CP-SAT) and ``milp`` (PuLP with HiGHS or CBC); see docs/exact.md.

Modules, one concept each: :mod:`.grid` (time tables, the integer time grid, device classes),
:mod:`.bounds` (lower bounds), :mod:`.call` (a call's budget, incumbent and fallback),
:mod:`.cpsat_model`, :mod:`.cpsat_search` (search and certificate), :mod:`.cpsat`, :mod:`.decode`
(decoding and replay), :mod:`.lns` (large-neighbourhood search, windows, unit moves),
:mod:`.milp_model` and :mod:`.milp`. Imported when a solver is used (the registry names them).
"""

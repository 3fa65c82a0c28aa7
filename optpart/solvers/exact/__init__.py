"""The exact solvers: ``cpsat`` (:mod:`.cpsat`, OR-Tools CP-SAT) and ``milp`` (:mod:`.milp`, PuLP with
HiGHS or CBC), their models, searches and windowed large-neighbourhood search (``lns*``),
and the bounds and time tables they share (``exact_*``, ``path_bounds``, ``_exact_common``).
See docs/exact.md. Modules are imported when a solver is used (the registry names them).
"""

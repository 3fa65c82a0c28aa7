"""The baselines: ``heft`` (:mod:`.heft`), ``etf`` (Baechi m-ETF, :mod:`.etf`), ``topo`` (Baechi
m-TOPO, :mod:`.topo`), ``metis`` (:mod:`.metis`) and ``single`` (:mod:`.single`). See
docs/baselines.md. Modules are imported when a solver is used (the registry names them).
"""

"""The plan report: every query's plan on a database at scale, committed beside the queries.

``scripts/plans`` builds a representative database (:mod:`jobrun_tools.plans.build`,
a million jobs by default), EXPLAINs every query of ``db/query`` and of the
detector with realistic parameters (:mod:`jobrun_tools.plans.cases`), writes each
query's plans as normalised text (:mod:`jobrun_tools.plans.render`) under
``db/plans/<file>/<Query>.txt``, checks the rules each query declares beside it
(:mod:`jobrun_tools.plans.rules`), and reviews what every migration locks on that
database (:mod:`jobrun_tools.plans.review`). ``--check`` compares with the
committed files instead of writing them.
"""

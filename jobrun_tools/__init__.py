"""Support for jobrun's plan checks, benchmarks and docs site; not part of the jobrun package.

``scripts/bench-claim``, ``scripts/plans`` and the plan tests read the claim's
plan and fill the jobs table with synthetic rows through this package
(:mod:`jobrun_tools.claimplan`), with queries of its own in ``query/``
generated into ``sqlc/`` by ``scripts/generate``. The documentation site's
generated reference pages (:mod:`jobrun_tools.docs_reference`, written by
``scripts/docs-reference``) and its MkDocs hooks
(:mod:`jobrun_tools.mkdocs_hooks`) live here too. The package lives beside
jobrun, not inside it, so the wheel users install carries none of it. Import it from
the repository's root (scripts and tests run there).
"""

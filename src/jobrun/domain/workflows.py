"""Workflows built from dependencies: groups with a callback, chains, and their graph.

A workflow is no object of its own in the database: it is the jobs linked
by ``NewJob.depends_on`` edges. :func:`group` and :func:`chain` only build
the :class:`~jobrun.domain.NewJob` lists that say so, to enqueue with
``enqueue_batch`` (in one transaction, the caller's own when given
``conn=``); :class:`Workflow` is what the store reads back, starting from
any one of its jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import JsonValue

from jobrun.domain.jobs import MAX_DEPENDENCIES, JobState, NewJob, new_job_problem

__all__ = [
    "MAX_WORKFLOW_STEPS",
    "Dependency",
    "Workflow",
    "WorkflowEdge",
    "WorkflowStep",
    "chain",
    "group",
]

MAX_WORKFLOW_STEPS = 10_000
"""The most steps a workflow read returns; a larger one is cut (``Workflow.complete`` False)."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """One job another waits for, and what became of it.

    ``state``, ``type``, ``attempts`` and ``error`` (its last error) are None
    once retention purged the job, which then counts as succeeded.
    ``if_failed`` is what its failure does to the waiting job (``"cancel"``
    or ``"run"``). ``result`` is what its handler returned, when it succeeded
    with a result and the reader asked for results (``ctx.dependencies()``
    does); otherwise None.
    """

    job_id: UUID
    state: JobState | None
    if_failed: str
    type: str | None = None
    attempts: int | None = None
    error: str | None = None
    result: JsonValue = None

    @property
    def succeeded(self) -> bool:
        """True when it succeeded (or was purged, which only a finished job is)."""
        return self.state is None or self.state is JobState.SUCCEEDED


@dataclass(frozen=True, slots=True)
class WorkflowStep:
    """One job of a workflow, as it is now; all but ``job_id`` None once purged."""

    job_id: UUID
    type: str | None
    queue: str | None
    state: JobState | None
    attempts: int | None
    created_at: datetime | None
    finished_at: datetime | None
    error: str | None


@dataclass(frozen=True, slots=True)
class WorkflowEdge:
    """``job_id`` waits for ``depends_on``; ``if_failed`` as in :class:`Dependency`."""

    depends_on: UUID
    job_id: UUID
    if_failed: str


@dataclass(frozen=True, slots=True)
class Workflow:
    """The jobs linked to one job by dependencies, either way and at any distance.

    ``steps`` starts with the job asked about; ``edges`` link them;
    ``complete`` is False when the workflow has more steps than were read.
    """

    steps: tuple[WorkflowStep, ...]
    edges: tuple[WorkflowEdge, ...]
    complete: bool

    def levels(self) -> list[list[WorkflowStep]]:
        """The steps in layers: each step one layer below the deepest step it waits for.

        A step whose dependencies were not read (a cut workflow) counts
        them as absent. The order within a layer is enqueue order.
        """
        by_id = {step.job_id: step for step in self.steps}
        waits: dict[UUID, list[UUID]] = {step.job_id: [] for step in self.steps}
        for edge in self.edges:
            if edge.job_id in waits and edge.depends_on in by_id:
                waits[edge.job_id].append(edge.depends_on)
        depth: dict[UUID, int] = {}

        def depth_of(job_id: UUID) -> int:
            # Iterative: a chain of thousands would overflow the recursion limit.
            stack = [job_id]
            while stack:
                top = stack[-1]
                pending = [d for d in waits[top] if d not in depth]
                if pending:
                    stack.extend(pending)
                    continue
                stack.pop()
                depth[top] = 1 + max((depth[d] for d in waits[top]), default=-1)
            return depth[job_id]

        layers: dict[int, list[WorkflowStep]] = {}
        for step in self.steps:
            layers.setdefault(depth_of(step.job_id), []).append(step)
        ordered = [layers[k] for k in sorted(layers)]
        for layer in ordered:
            layer.sort(key=lambda s: (s.created_at is None, s.created_at, str(s.job_id)))
        return ordered

    def as_json(self) -> dict[str, Any]:
        """Plain JSON data: ``complete``, ``counts``, the steps by ``levels``, the ``edges``."""
        return {
            "complete": self.complete,
            "counts": self.counts(),
            "levels": [
                [
                    {
                        "id": str(step.job_id),
                        "type": step.type,
                        "queue": step.queue,
                        "state": None if step.state is None else step.state.value,
                        "attempts": step.attempts,
                        "error": step.error,
                    }
                    for step in level
                ]
                for level in self.levels()
            ],
            "edges": [
                {"depends_on": str(e.depends_on), "job_id": str(e.job_id), "if_failed": e.if_failed}
                for e in self.edges
            ],
        }

    def counts(self) -> dict[str, int]:
        """How many steps are in each state (``"purged"`` for those gone)."""
        counts: dict[str, int] = {}
        for step in self.steps:
            key = "purged" if step.state is None else str(step.state)
            counts[key] = counts.get(key, 0) + 1
        return counts


def _checked(job: NewJob, what: str) -> NewJob:
    """``job`` as given, or ValueError naming ``what`` and its problem.

    ``model_copy`` skips validation, so the copies made here are checked the
    way ``NewJob`` checks itself.
    """
    problem = new_job_problem(job)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")
    return job


def group(parts: Sequence[NewJob], then: NewJob) -> list[NewJob]:
    """Jobs that run in parallel, and ``then``, a callback that runs once after all of them.

    Returns ``[*parts, then]`` with ``then`` waiting for every part and
    running whatever their outcomes (``if_dependency_fails="run"``): its
    handler reads each part's state, error and result with
    ``ctx.dependencies()``. Enqueue the list with ``enqueue_batch``, in one
    transaction. ``then`` keeps any dependencies it already had. At most
    1,000 dependencies in all; ValueError otherwise, or when ``parts`` is
    empty or names a job twice.
    """
    if not parts:
        raise ValueError("a group needs at least one part")
    ids = [part.id for part in parts]
    wanted = (*then.depends_on, *ids)
    if len(wanted) > MAX_DEPENDENCIES:
        raise ValueError(
            f"a group's callback may wait for at most {MAX_DEPENDENCIES} jobs, not {len(wanted)}"
        )
    callback = then.model_copy(update={"depends_on": wanted, "if_dependency_fails": "run"})
    return [*parts, _checked(callback, "the group's callback")]


def chain(steps: Sequence[NewJob]) -> list[NewJob]:
    """Jobs that run one after another: each step waits for the one before it.

    Returns the steps in order, each but the first depending on its
    predecessor (added to any dependencies it already had). A step that ends
    dead or cancelled cancels the rest of the chain, unless a step says
    ``if_dependency_fails="run"``. Enqueue the list with ``enqueue_batch``.
    ValueError when ``steps`` is empty or names a job twice.
    """
    if not steps:
        raise ValueError("a chain needs at least one step")
    if len({step.id for step in steps}) != len(steps):
        raise ValueError("a chain names a job twice")
    linked = [steps[0]]
    for position, step in enumerate(steps[1:], start=2):
        following = step.model_copy(update={"depends_on": (*step.depends_on, linked[-1].id)})
        linked.append(_checked(following, f"step {position} of the chain"))
    return linked

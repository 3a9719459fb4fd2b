"""Lineage: raw files -> dataset versions -> runs -> model versions -> deployments.

The graph is read from the records each layer already keeps (nothing is written): a
dataset version's recipe (`op`, and for an ingest its source URI and digest) and parent
edges, a run's dataset version, a model version's run and `parent` (the `forgeml.parent`
tag of a fine-tuned, distilled, quantised or mitigated version), a deployment's spec.
Edges point downstream, from what was used to what used it; `lineage` keeps the nodes
within `depth` links of the reference, up (towards the raw files), down (towards the
deployments) or both, and every recorded edge between them.

Records belong to projects. Given `may_read(kind, project)` (the API's authorizer), a record
the caller may not read is kept as one opaque node, `kind` "in another project", naming no
record, and the walk stops there; its edges to records the caller may read are kept, so the
graph still says that something used them. A raw file is reached only through the dataset
versions that read it, so a hidden dataset's files stay hidden. Without `may_read` (the
embedded single-user mode) every record is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import networkx as nx
from sqlalchemy import select

from forgeml.core.errors import UsageError
from forgeml.core.store import DatasetVersion, LineageEdge, ModelVersionRecord, RunRecord
from forgeml.governance.lineage_options import DIRECTIONS, Direction
from forgeml.governance.lineage_refs import (
    HIDDEN_LABEL,
    ReadCheck,
    node_key,
    resolve_root,
)

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.serve.deployments import Deployment

NodeKind = Literal["source", "dataset", "run", "model", "deployment"]
Relation = Literal["ingested", "derived", "trained", "registered", "served"]
# left to right in a drawing, top to bottom in the table
KIND_ORDER: tuple[NodeKind, ...] = get_args(NodeKind)


@dataclass(frozen=True)
class Node:
    """One record: `kind` and `ref` name it (`key` is `kind:ref`), `label` is what a
    drawing shows, `attrs` what the record says about it (digest, rows, status...).

    A `hidden` node stands for a record of a project the caller may not read: its `ref`
    is a handle (`~1`, `~2`: no record's name), its label `HIDDEN_LABEL`, its attrs empty.
    """

    kind: NodeKind
    ref: str
    label: str
    attrs: dict[str, Any] = field(default_factory=dict)
    hidden: bool = False

    @property
    def key(self) -> str:
        return node_key(self.kind, self.ref)


@dataclass(frozen=True)
class Edge:
    """`source` (a node key) was used by `target`; `attrs` says how (the transform's
    `op`, the deployment's `role`)."""

    source: str
    target: str
    relation: Relation
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Lineage:
    """The nodes and edges around `root` (a node key), as `lineage` walked them."""

    root: str
    depth: int | None
    direction: Direction
    nodes: list[Node]
    edges: list[Edge]

    def to_dict(self) -> dict[str, Any]:
        """What `forgeml lineage --json` prints and `GET /api/v1/lineage/{ref}` answers."""
        return {
            "root": self.root,
            "depth": self.depth,
            "direction": self.direction,
            "nodes": [_node_dict(n) for n in self.nodes],
            "edges": [
                {"source": e.source, "target": e.target, "relation": e.relation, "attrs": e.attrs}
                for e in self.edges
            ],
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Lineage:
        """The lineage `to_dict` wrote (the API's answer, read back by the CLI)."""
        return cls(
            root=payload["root"],
            depth=payload["depth"],
            direction=payload["direction"],
            nodes=[_read_node(n) for n in payload["nodes"]],
            edges=[
                Edge(e["source"], e["target"], e["relation"], dict(e["attrs"]))
                for e in payload["edges"]
            ],
        )

    def graph(self) -> nx.MultiDiGraph:
        """The lineage as a networkx graph: node attribute `node` (a `Node`) and `layer`
        (its kind's place in `KIND_ORDER`), edge attribute `edge` (an `Edge`)."""
        graph = nx.MultiDiGraph()
        for node in self.nodes:
            graph.add_node(node.key, node=node, layer=KIND_ORDER.index(node.kind))
        for edge in self.edges:
            graph.add_edge(edge.source, edge.target, edge=edge)
        return graph


def _node_dict(node: Node) -> dict[str, Any]:
    # a hidden node's `ref` is null: its id's handle names no record
    ref = None if node.hidden else node.ref
    return {"id": node.key, "kind": node.kind, "ref": ref, "label": node.label,
            "attrs": node.attrs, "hidden": node.hidden}  # fmt: skip


def _read_node(payload: dict[str, Any]) -> Node:
    hidden = bool(payload.get("hidden", False))
    ref = payload["id"].partition(":")[2] if hidden else payload["ref"]
    return Node(payload["kind"], ref, payload["label"], dict(payload["attrs"]), hidden)


def lineage(
    workspace: Workspace,
    ref: str,
    depth: int | None = None,
    direction: Direction = "both",
    *,
    may_read: ReadCheck | None = None,
) -> Lineage:
    """The lineage of the record `ref` names.

    Args:
        workspace: whose records to read (read-only).
        ref: a dataset version, model version, run or deployment, bare (`adult@v2`) or
            with its kind (`model:adult-mlp@v1`, `run:<id>`, `deployment:NAME`).
        depth: how many links to follow from `ref`; None: all.
        direction: `up` to what `ref` was made from, `down` to what used it, or `both`.
        may_read: whether the caller may read a record of a kind in a project; a record it
            may not read is an opaque node the walk does not pass. None: every record.

    Returns:
        The nodes within `depth` links, ordered by kind then ref, and the edges between them
        (none between two hidden nodes).

    Raises:
        NotFoundError: `ref` names nothing.
        UsageError: a bad depth or direction, or a bare `ref` naming records of two kinds.
    """
    if depth is not None and depth < 0:
        raise UsageError(f"The depth is a number of links, 0 or more, not {depth}.")
    if direction not in DIRECTIONS:
        raise UsageError(f"Unknown direction '{direction}': use up, down or both.")
    root = resolve_root(workspace, ref)
    graph = records_graph(workspace)

    def visible(key: str) -> bool:
        data = graph.nodes[key]
        project = data.get("project")
        # a raw file, an external parent or a removed record carries no project: it is
        # reached only from a record the caller may read, which names it
        return may_read is None or project is None or may_read(data["node"].kind, project)

    kept = {root}
    if direction in ("down", "both"):
        kept |= _reach(graph.successors, root, depth, visible)
    if direction in ("up", "both"):
        kept |= _reach(graph.predecessors, root, depth, visible)
    nodes, edges = _masked(graph.subgraph(kept), visible)
    return Lineage(root, depth, direction, nodes, edges)


def _reach(
    neighbours: Callable[[str], Iterator[str]],
    root: str,
    depth: int | None,
    visible: Callable[[str], bool],
) -> set[str]:
    """The nodes within `depth` links of `root` (breadth first), passing no hidden node."""
    seen, frontier, links = {root}, [root], 0
    while frontier and (depth is None or links < depth):
        links += 1
        reached = [
            other
            for key in frontier
            if visible(key)
            for other in neighbours(key)
            if other not in seen
        ]
        seen.update(reached)
        frontier = list(dict.fromkeys(reached))
    return seen


def _masked(sub: nx.MultiDiGraph, visible: Callable[[str], bool]) -> tuple[list[Node], list[Edge]]:
    """The nodes of `sub`, each hidden one an opaque node, and its edges: to a hidden node
    without the attrs its record gave them (a transform's op, a deployment's role), and
    none between two hidden nodes."""
    shown: dict[str, Node] = {}
    counts: dict[str, int] = {}
    for key in sorted(sub, key=lambda key: _node_order(sub.nodes[key]["node"])):
        node: Node = sub.nodes[key]["node"]
        if not visible(key):
            counts[node.kind] = counts.get(node.kind, 0) + 1
            node = Node(node.kind, f"~{counts[node.kind]}", HIDDEN_LABEL, {}, hidden=True)
        shown[key] = node
    edges = []
    for source, target, data in sub.edges(data=True):
        if not (visible(source) or visible(target)):
            continue
        edge: Edge = data["edge"]
        # an edge's attrs are its target's (the child's op, the deployment's role)
        attrs = edge.attrs if visible(target) else {}
        edges.append(Edge(shown[source].key, shown[target].key, edge.relation, attrs))
    order = {node.key: _node_order(node) for node in shown.values()}
    edges.sort(key=lambda e: (order[e.source], e.target, e.relation))
    return sorted(shown.values(), key=_node_order), edges


def _node_order(node: Node) -> tuple[int, bool, str]:
    return KIND_ORDER.index(node.kind), node.hidden, node.ref


def records_graph(workspace: Workspace) -> nx.MultiDiGraph:
    """Every lineage record of the workspace as one graph (see `Lineage.graph`)."""
    from forgeml.serve.deployments import list_deployments

    with workspace.store.session() as session:
        versions = list(session.scalars(select(DatasetVersion)).unique())
        parents = list(session.execute(select(LineageEdge.child_id, LineageEdge.parent_id)))
        runs = list(session.scalars(select(RunRecord)).unique())
        models = list(session.scalars(select(ModelVersionRecord)).unique())
        refs = {version.id: version.ref for version in versions}
    builder = _Builder()
    builder.add_datasets(versions, [(child, parent) for child, parent in parents], refs)
    builder.add_runs(runs, refs)
    builder.add_models(models)
    builder.add_deployments(list_deployments(workspace))
    return builder.finish()


class _Builder:
    """Adds records to one graph; an edge may name a node added later (a model's parent)."""

    def __init__(self) -> None:
        self.graph = nx.MultiDiGraph()

    def node(self, node: Node, project: str | None = None) -> str:
        """Add `node` (a record of `project`; None for a raw file or an external parent)."""
        if node.key not in self.graph or self.graph.nodes[node.key].get("node") is None:
            layer = KIND_ORDER.index(node.kind)
            self.graph.add_node(node.key, node=node, layer=layer, project=project)
        return node.key

    def edge(self, edge: Edge) -> None:
        self.graph.add_edge(edge.source, edge.target, edge=edge)

    def finish(self) -> nx.MultiDiGraph:
        """The graph, a node that only an edge named (a record since removed) marked
        `missing`; node attribute `project` is the project of each record."""
        for key, data in self.graph.nodes(data=True):
            if data.get("node") is None:
                kind, _, ref = key.partition(":")
                data["node"] = Node(cast("NodeKind", kind), ref, ref, {"missing": True})
                data["layer"] = KIND_ORDER.index(data["node"].kind)
        return self.graph

    def add_datasets(
        self,
        versions: Iterable[DatasetVersion],
        parents: Iterable[tuple[str, str]],
        refs: dict[str, str],
    ) -> None:
        ops = {}
        for version in versions:
            key = self.node(_dataset_node(version), version.dataset.project)
            ops[version.id] = version.recipe.get("op")
            source = _source_node(version.recipe)
            if source is not None:
                self.edge(Edge(self.node(source), key, "ingested"))
        for child, parent in parents:
            self.edge(
                Edge(
                    node_key("dataset", refs[parent]),
                    node_key("dataset", refs[child]),
                    "derived",
                    {"op": ops[child]},
                )
            )

    def add_runs(self, runs: Iterable[RunRecord], refs: dict[str, str]) -> None:
        for run in runs:
            key = self.node(
                Node(
                    "run",
                    run.id,
                    f"{run.name} ({run.id[:8]})",
                    {
                        "name": run.name,
                        "status": run.status,
                        "started_at": _moment(run.started_at),
                    },
                ),
                run.project,
            )
            if run.dataset_version_id is not None:
                dataset = node_key("dataset", refs[run.dataset_version_id])
                self.edge(Edge(dataset, key, "trained"))

    def add_models(self, models: Iterable[ModelVersionRecord]) -> None:
        for model in models:
            attrs = {"digest": model.artifact_digest, "created_at": _moment(model.created_at)}
            key = self.node(Node("model", model.ref, model.ref, attrs), model.project)
            self.edge(Edge(node_key("run", model.run_id), key, "registered"))
            if model.parent:
                # an external parent (`hf:...`, containing ':') is no record of this
                # workspace: a node of its own, marked so
                if ":" in model.parent:
                    parent = Node("model", model.parent, model.parent, {"external": True})
                    self.node(parent)
                self.edge(Edge(node_key("model", model.parent), key, "derived"))

    def add_deployments(self, deployments: Iterable[Deployment]) -> None:
        for deployment in deployments:
            attrs = {
                "status": deployment.status,
                "revision": deployment.revision,
                "model_ref": deployment.spec.model_ref,
            }
            node = Node("deployment", deployment.name, deployment.name, attrs)
            key = self.node(node, deployment.project)
            for role, model in deployment.spec.plan():
                self.edge(Edge(node_key("model", model), key, "served", {"role": role}))


def _dataset_node(version: DatasetVersion) -> Node:
    attrs = {
        "digest": version.digest,
        "rows": version.rows,
        "op": version.recipe.get("op"),
        "created_at": _moment(version.created_at),
    }
    return Node("dataset", version.ref, version.ref, attrs)


def _source_node(recipe: dict[str, Any]) -> Node | None:
    """The raw file (or URL, or stream) an ingest read: its URI and the digest of its bytes."""
    params = recipe.get("params") or {}
    uri = params.get("source")
    digest = params.get("source_digest") or params.get("raw_digest")
    if not isinstance(uri, str) or not isinstance(digest, str):
        return None
    name = uri.rstrip("/").rsplit("/", 1)[-1] or uri
    attrs = {"uri": uri, "digest": digest, "source_kind": params.get("source_kind", "file")}
    return Node("source", f"{uri}@{digest[:12]}", f"{name} ({digest[:8]})", attrs)


def _moment(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()

"""A lineage as a picture: Graphviz DOT text, or SVG / PNG drawn by matplotlib.

The drawing is layered left to right by kind (raw files, dataset versions, runs, model
versions, deployments: networkx's `multipartite_layout`), each edge labelled with its
relation (a transform's op, a deployment's role).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Literal

from forgeml.governance.lineage import KIND_ORDER, Edge, Lineage

if TYPE_CHECKING:
    import networkx as nx
    from matplotlib.axes import Axes

ImageFormat = Literal["svg", "png"]

# one colour per kind (matplotlib's tab10), the same in DOT and in the images
KIND_COLOURS = {
    "source": "#7f7f7f",
    "dataset": "#1f77b4",
    "run": "#ff7f0e",
    "model": "#2ca02c",
    "deployment": "#d62728",
}
_SHAPES = {
    "source": "note",
    "dataset": "cylinder",
    "run": "box",
    "model": "component",
    "deployment": "box3d",
}


def edge_label(edge: Edge) -> str:
    """What a picture writes on an edge: the transform or role when there is one."""
    detail = edge.attrs.get("op") or edge.attrs.get("role")
    return f"{edge.relation} ({detail})" if detail else edge.relation


def to_dot(lineage: Lineage) -> str:
    """The lineage as a Graphviz `digraph` (left to right; `dot -Tsvg` draws it)."""
    lines = ["digraph lineage {", "  rankdir=LR;", '  node [style=filled, fontcolor="white"];']
    for node in lineage.nodes:
        bold = ", penwidth=3" if node.key == lineage.root else ""
        # a record of another project: dashed, as a drawing's opaque node
        dashed = ', style="filled,dashed"' if node.hidden else ""
        lines.append(
            f"  {_quote(node.key)} [label={_quote(f'{node.kind}: {node.label}')}, "
            f'shape={_SHAPES[node.kind]}, fillcolor="{KIND_COLOURS[node.kind]}"{bold}{dashed}];'
        )
    for edge in lineage.edges:
        lines.append(
            f"  {_quote(edge.source)} -> {_quote(edge.target)} [label={_quote(edge_label(edge))}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    # a DOT ID in double quotes: only `"` and `\` need escaping (Graphviz's grammar)
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_image(lineage: Lineage, image_format: ImageFormat) -> bytes:
    """The lineage drawn as an SVG or PNG image (matplotlib, without a display)."""
    # a Figure of its own, not pyplot's: the API draws from several threads at once
    import networkx as nx
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    graph = lineage.graph()
    layers = {data["layer"] for _, data in graph.nodes(data=True)}
    height = max(
        (sum(1 for _, d in graph.nodes(data=True) if d["layer"] == layer) for layer in layers),
        default=1,
    )
    figure = Figure(figsize=(3.2 * max(len(layers), 1), 1.2 * height + 1.5))
    axes = figure.subplots()
    layout = nx.multipartite_layout(graph, subset_key="layer", align="vertical")
    # the layout stacks a layer's nodes upwards; flipped, a chain (v1 -> v2) reads downwards
    positions = {key: (x, -y) for key, (x, y) in layout.items()}
    _draw(graph, positions, lineage.root, axes)
    axes.set_title(f"lineage of {lineage.root}")
    axes.axis("off")
    buffer = io.BytesIO()
    # no date or version stamped: the same graph, the same bytes
    metadata = {"Date": None} if image_format == "svg" else {"Software": None}
    # text as <text> elements, not glyph paths: an SVG's labels stay searchable; ids
    # salted the same each time, not at random
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "forgeml-lineage"}):
        figure.savefig(buffer, format=image_format, bbox_inches="tight", metadata=metadata)
    return buffer.getvalue()


def _draw(graph: nx.MultiDiGraph, positions: dict[str, Any], root: str, axes: Axes) -> None:
    import networkx as nx

    nodes = list(graph)
    data = graph.nodes
    nx.draw_networkx_edges(
        graph, positions, ax=axes, arrows=True, arrowsize=14, edge_color="#555555",
        node_size=2400,
    )  # fmt: skip
    nx.draw_networkx_nodes(
        graph, positions, ax=axes, nodelist=nodes, node_size=2400,
        node_color=[KIND_COLOURS[data[key]["node"].kind] for key in nodes],
        edgecolors=["black" if key == root else "white" for key in nodes],
        linewidths=[3 if key == root else 1 for key in nodes],
    )  # fmt: skip
    nx.draw_networkx_labels(
        graph, positions, ax=axes, font_size=7,
        labels={key: data[key]["node"].label for key in nodes},
    )  # fmt: skip
    labels = {(u, v): edge_label(d["edge"]) for u, v, d in graph.edges(data=True)}
    nx.draw_networkx_edge_labels(graph, positions, edge_labels=labels, ax=axes, font_size=6)
    for kind in KIND_ORDER:
        axes.scatter([], [], color=KIND_COLOURS[kind], label=kind)
    axes.legend(loc="lower left", fontsize=7, frameon=False)

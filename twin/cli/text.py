"""`twin show`: a lab's figures, nodes, links and addresses as text a person reads."""

from __future__ import annotations

import textwrap

from twin.lab.directory import Lab

FIGURE_LABELS = {
    "servers": "servers",
    "gpus": "GPUs",
    "server_ports": "server ports",
    "tiers": "tiers",
    "pods": "pods",
    "superspines": "super-spines",
    "spines": "spines",
    "leaves": "leaves",
    "uplinks_per_leaf": "uplinks per leaf",
    "links_per_spine": "links per leaf-spine bundle",
    "oversubscription_max": "oversubscription (worst leaf)",
    "bisection_gbps": "bisection bandwidth (Gb/s)",
    "ecmp_width": "ECMP width (leaf to leaf)",
    "rails": "rails (a leaf group per NIC k)",
    "scalable_units": "scalable units",
}


def table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), fmt.format(*("-" * w for w in widths))] + [
        fmt.format(*r) for r in rows
    ]


def render(lab: Lab, where: str = "") -> str:
    """Figures, then nodes, then links of a lab directory (`where` it is, if not its path)."""
    out = [f"lab {lab.name} ({where or lab.path})", ""]
    figs = lab.figures
    width = max(len(label) for label in FIGURE_LABELS.values())
    out += [f"{label:<{width}}  {figs[key]}" for key, label in FIGURE_LABELS.items() if key in figs]
    g = lab.graph
    node_rows = []
    for node, attrs in g.nodes(data=True):
        address = attrs.get("loopback") or attrs.get("address", "")
        node_rows.append(
            [
                node,
                attrs["role"],
                str(attrs.get("pod", "")),
                str(attrs.get("asn", "")),
                address,
                attrs.get("mlag_peer") or ", ".join(attrs.get("leaves", [])),
            ]
        )
    out += ["", *table(node_rows, ["node", "role", "pod", "asn", "address", "mlag peer / leaves"])]
    link_rows = []
    for _, _, e in g.edges(data=True):
        a = f"{e['a']}:{e['a_port']}" + (f" ({e['a_bundle']})" if e["a_bundle"] else "")
        b = f"{e['b']}:{e['b_port']}" + (f" ({e['b_bundle']})" if e["b_bundle"] else "")
        link_rows.append(
            [e["kind"], a, b, f"{e['speed'] // 1000}G", f"{e['cable_m']}m", e["prefix"] or ""]
        )
    out += ["", *table(link_rows, ["kind", "a", "b", "speed", "cable", "prefix"])]
    return "\n".join(out) + "\n"


def wrapped_table(rows: list[list[str]], header: list[str], width: int | None) -> list[str]:
    """`table`, its last column wrapped so that each line fits `width` characters (None: one
    line per row, however long); the wrapped text continues on lines of its own, and the
    last column keeps 20 characters at least.

    >>> print("\\n".join(wrapped_table([["a", "one two three four five"]], ["v", "why"], 12)))
    v  why
    -  ------------------
    a  one two three four
       five
    """
    if width is None:
        return table(rows, header)
    fixed = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
    room = max(20, width - sum(w + 2 for w in fixed))
    lines = []
    for row in rows:
        parts = textwrap.wrap(str(row[-1]), room) or [""]
        lines.append([*row[:-1], parts[0]])
        lines += [["" for _ in fixed] + [part] for part in parts[1:]]
    shown = table(lines, header)
    return [line.rstrip() for line in shown]

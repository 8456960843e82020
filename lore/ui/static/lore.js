// lore ui: "/" focuses the search box; hovering a record in a graph lights up its links.
"use strict";
document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  const typing = document.activeElement && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
  if (typing) return;
  const box = document.getElementById("q") || document.getElementById("quick-search");
  if (box) { event.preventDefault(); box.focus(); box.select(); }
});
for (const svg of document.querySelectorAll("svg.graph")) {
  const edges = Array.from(svg.querySelectorAll("g.edge"));
  for (const node of svg.querySelectorAll(".node")) {
    const id = node.dataset.id;
    node.addEventListener("mouseenter", () => {
      svg.classList.add("focus");
      node.classList.add("lit");
      for (const edge of edges) {
        if (edge.dataset.from !== id && edge.dataset.to !== id) continue;
        edge.classList.add("lit");
        const other = edge.dataset.from === id ? edge.dataset.to : edge.dataset.from;
        const far = svg.querySelector(`.node[data-id="${CSS.escape(other)}"]`);
        if (far) far.classList.add("lit");
      }
    });
    node.addEventListener("mouseleave", () => {
      svg.classList.remove("focus");
      for (const lit of svg.querySelectorAll(".lit")) lit.classList.remove("lit");
    });
  }
}

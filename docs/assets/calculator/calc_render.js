// A results view (sizing.view, built by the worker's Python) put into the DOM. Generic: it knows the
// five block kinds of the view, not the components, colours (CSS classes) or number formats. The build
// renders the same view as the first paint (scripts/sitebuild/calculator_results.py). Text reaches the
// page through text nodes and setAttribute only, never as HTML.
const SVG = "http://www.w3.org/2000/svg";

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const withClass = (cls, attrs) => (cls ? { class: cls, ...attrs } : { ...attrs });

function table(block) {
  const head = h("thead", {}, h("tr", {}, ...block.head.map((text) => h("th", {}, text))));
  const body = h("tbody", {}, ...block.rows.map((row) => h("tr", row.attrs, ...row.cells.map((cell) => {
    const mark = cell.mark ? [h("span", { class: cell.mark })] : [];
    return h(cell.header ? "th" : "td", cell.header ? { scope: "row" } : {}, ...mark, cell.text);
  }))));
  const el = h("table", withClass(block.class, block.attrs), head, body);
  if (!block.wrap) return el;
  const parts = [block.title ? h("h3", {}, block.title) : null, el,
    block.note ? h("p", { class: "calc-note" }, block.note) : null].filter(Boolean);
  return h("div", withClass(block.wrap.class, block.wrap.attrs), ...parts);
}

const KINDS = {
  stats: (b) => h("div", withClass(b.class, b.attrs), ...b.items.map((i) =>
    h("div", { class: "calc-peak" }, h("span", {}, i.label), " ", h("strong", i.attrs, i.text)))),
  text: (b) => h("p", withClass(b.class, b.attrs), ...b.parts.map((p) =>
    (Object.keys(p.attrs).length ? h("span", p.attrs, p.text) : p.text))),
  list: (b) => h("ul", withClass(b.class, b.attrs), ...b.items.map((i) => h("li", i.attrs, i.text))),
  bar: (b) => svg("svg", { ...withClass(b.class, b.attrs), viewBox: "0 0 1000 40", preserveAspectRatio: "none",
    role: "img", "aria-label": b.label }, ...b.segments.map((s) => svg("rect", { x: s.x.toFixed(2), y: 0,
    width: s.width.toFixed(2), height: 40, class: s.class }, svg("title", {}, s.title)))),
  table,
};

export function block(b) {
  const el = KINDS[b.kind](b);
  el.setAttribute("data-block", b.key);
  return el;
}

// One view in place of #calc-results. The blocks it lists as pending (the fit table, a moment later)
// keep their previous content, marked stale.
export function renderResults(view) {
  const box = h("div", { id: "calc-results", class: "calc-results", "data-testid": "results", "aria-live": "polite" });
  box.append(...view.blocks.map(block));
  const old = document.getElementById("calc-results");
  for (const key of view.pending || []) {
    const part = old.querySelector(`[data-block="${CSS.escape(key)}"]`);
    if (!part) continue;
    part.classList.add("calc-stale");
    box.append(part);
  }
  old.replaceWith(box);
}

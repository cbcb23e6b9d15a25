// Numbers of the report panel and the request text in the page's language: sizing.view.fmt_num's format
// (tests/pyodide/test_number_format.py holds the two to the same output). The results view needs none of
// this: its numbers arrive formatted.
export function makeFormat(lang) {
  function num(value, decimals) {
    const text = Math.abs(value).toFixed(decimals);
    let [whole, frac] = text.split(".");
    const [sep, point] = lang === "en" ? [",", "."] : ["\u00a0", ","];
    whole = whole.replace(/\B(?=(\d{3})+(?!\d))/g, sep);
    return (value < 0 ? "−" : "") + whole + (frac ? point + frac : "");
  }
  const gib = (bytes) => num(bytes / 2 ** 30, 2);
  const cost = (v) => (v === null || v === undefined ? "—" : num(Number(v), 2));
  const fill = (template, params) => template.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m));
  const percent = (v) => `${v > 0 ? "+" : ""}${num(v, 1)}${lang === "en" ? "%" : "\u00a0%"}`;
  return { num, gib, cost, fill, percent };
}

// An imported trial report (docs/recipes/trial.py) next to the estimate of the configuration it ran,
// as the worker's calc_bridge.report_json answers it. Text only: the report's message, model names and
// reasons are shown with textContent.
import { h } from "./calc_render.js";

const FIGURES = ["allocated", "reserved", "device"];
export const MAX_REPORT_BYTES = 5e6;

// What the rental request carries from a report: contract-free names, read back by request.js.
export function measuredParams(cmp) {
  const out = {};
  for (const name of FIGURES) {
    const value = cmp.figures[name].measured_bytes;
    if (value !== null && value !== undefined) out["measured_" + name] = String(value);
  }
  const t = cmp.time || {};
  if (t.measured_step_seconds) out.measured_step_seconds = String(t.measured_step_seconds);
  if (t.measured_tokens_per_second) out.measured_tokens_per_second = String(Math.round(t.measured_tokens_per_second));
  return out;
}

export function reportPanel(answer, t, fmt) {
  const panel = h("section", { id: "calc-report", class: "calc-report", "data-testid": "report" });
  panel.append(h("h3", {}, t("report_title")));
  if (!answer.ok) {
    const err = answer.error || {};
    const key = "e_" + err.code;
    // the page's words only, filled with the refusal's parameters (sizing's English message stays out)
    const text = fmt.fill(t(key) === key ? t("e_other") : t(key), { ...(err.params || {}), field: err.field || "" });
    panel.dataset.status = "error";
    panel.dataset.detail = String(err.message || "");
    panel.append(h("p", { class: "calc-error", "data-testid": "report-error", role: "alert" }, text));
    return panel;
  }
  const cmp = answer.comparison;
  panel.dataset.status = cmp.status;
  const where = cmp.world_size > 1 ? ` (rank ${cmp.rank} / ${cmp.world_size})` : "";
  panel.append(h("p", {}, fmt.fill(t("report_status"), { status: cmp.status, steps: cmp.steps }) + where + ": ",
    h("span", { "data-testid": "report-message" }, String(cmp.message))));
  if (cmp.status === "oom" && cmp.failure) {
    panel.append(h("p", { class: "calc-error" }, fmt.fill(t("report_oom"),
      { step: cmp.failure.step ?? "—", phase: cmp.failure.phase ?? "—" })));
  }
  const pct = (v) => (v === null || v === undefined ? "—" : fmt.percent(v));
  const gibOr = (v) => (v === null || v === undefined ? "—" : fmt.gib(v));
  const body = h("tbody");
  const notes = [];
  for (const name of FIGURES) {
    const f = cmp.figures[name];
    const inRange = f.within_range === null ? "" : f.within_range ? " ✓" : " ✗";
    body.append(h("tr", { "data-testid": "report-" + name, "data-estimated": f.estimated_bytes,
      "data-measured": f.measured_bytes ?? "" },
    h("th", { scope: "row" }, t(name)), h("td", {}, fmt.gib(f.estimated_bytes)),
    h("td", {}, `${fmt.gib(f.range_bytes[0])}–${fmt.gib(f.range_bytes[1])}`), h("td", {}, gibOr(f.measured_bytes)),
    h("td", {}, pct(f.difference_percent) + inRange)));
    if (f.reason && !notes.includes(f.reason)) notes.push(f.reason);
  }
  const time = cmp.time || {};
  const sec = (v) => (v === null || v === undefined ? "—" : fmt.num(v, 2));
  body.append(h("tr", { "data-testid": "report-step" }, h("th", { scope: "row" }, t("report_step")),
    h("td", {}, sec(time.estimated_step_seconds)), h("td", {}, ""), h("td", {}, sec(time.measured_step_seconds)),
    h("td", {}, pct(time.step_difference_percent))));
  const tps = (v) => (v === null || v === undefined ? "—" : fmt.num(Math.round(v), 0));
  body.append(h("tr", { "data-testid": "report-tps" }, h("th", { scope: "row" }, t("tokens_per_second")),
    h("td", {}, tps(time.estimated_tokens_per_second)), h("td", {}, ""), h("td", {}, tps(time.measured_tokens_per_second)),
    h("td", {}, pct(time.tokens_difference_percent))));
  const heads = ["", "estimated_gib", "report_range", "measured_gib", "report_diff"].map((k) => h("th", {}, k && t(k)));
  panel.append(h("div", { class: "calc-fit-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, ...heads)), body)));
  const c = cmp.checks || {};
  const yesNo = (v) => (v === null || v === undefined ? "—" : v ? "✓" : "✗");
  const loss = (v) => (v === null || v === undefined ? "—" : fmt.num(v, 4));
  panel.append(h("p", { "data-testid": "report-checks" }, `${t("report_reload")}: ${yesNo(c.reload_matches)}; `
    + `${t("report_loss")}: ${loss(c.eval_loss_before)} → ${loss(c.eval_loss_after)}`));
  const before = cmp.before_train;
  if (before && before.reserved_bytes !== null && before.reserved_bytes !== undefined) {
    panel.append(h("p", { class: "calc-note", "data-testid": "report-before-train",
      "data-floor": String(Boolean(before.reserved_peak_is_this_floor)) },
    fmt.fill(t("report_before"), { gib: fmt.gib(before.reserved_bytes) })
      + (before.reserved_peak_is_this_floor ? " " + t("report_floor") : "")));
  }
  for (const note of notes) panel.append(h("p", { class: "calc-note" }, `${t("report_not_measured")}: ${note}`));
  panel.append(h("p", { class: "calc-note" }, fmt.fill(t("report_note"), { phase: t(cmp.peak_phase),
    confidence: t("conf_" + cmp.confidence) })));
  return panel;
}

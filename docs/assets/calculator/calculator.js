// The calculator page: reads the form (contract field names), keeps the whole configuration in the URL
// query, asks the Web Worker (Pyodide + sizing) for the estimate and places its results view (calc_render.js); imports
// a trial report (calc_report.js). Everything typed or computed reaches the page through textContent /
// setAttribute only, never as HTML.
import { makeFormat } from "./calc_format.js";
import { h, renderResults } from "./calc_render.js";
import { MAX_REPORT_BYTES, measuredParams, reportPanel } from "./calc_report.js";
import { parseJSON } from "./calc_json.js";
import { newWorker, pageWorker } from "./calc_worker.js";
import { makeAdapter } from "./calc_adapt.js";

const TRIAL = "trial.py config.json --data data.jsonl --out trial-out --max-steps 20";
// Accelerate's own config for a sharded run (the recipe page shows both forms)
const SHARDING_CONFIG = { fsdp: "fsdp.yaml", zero2: "deepspeed.yaml", zero3: "deepspeed.yaml" };
const MAX_CONFIG_BYTES = 1e6; // a model's config.json is a few kB

const root = document.getElementById("calc");
if (root && !root.dataset.bound) {
  root.dataset.bound = "1";
  main();
}

function main() {
  const data = JSON.parse(document.getElementById("calc-data").textContent);
  const L = data.text;
  const form = document.getElementById("calc-form");
  const status = document.getElementById("calc-status");
  const general = document.getElementById("calc-error-general");
  const progress = document.getElementById("calc-progress");
  const doc = document.documentElement;
  const t = (key) => (key in L ? L[key] : key);
  const fmt = makeFormat(data.lang);
  // The page's words go with every request: the worker's Python returns the results already in them.
  const words = JSON.stringify({ lang: data.lang, text: L });

  // The worker, taken over before anything else is wired.
  const { worker, error: workerError, startedAt, replay } = pageWorker();

  // --- form <-> configuration <-> URL -----------------------------------------------------------------
  const fields = () => Array.from(form.querySelectorAll("[name][data-kind]"));

  function readForm() {
    const config = {};
    const local = [];
    for (const el of fields()) {
      const kind = el.dataset.kind;
      const raw = kind === "bool" ? "" : el.value.trim();
      if (kind === "bool") config[el.name] = el.checked;
      else if (kind === "select") config[el.name] = el.value;
      else if (kind === "tristate") config[el.name] = raw === "" ? null : raw === "true"; // "": the framework's rule
      else if (kind === "list") config[el.name] = raw === "" ? null : raw === "all-linear" ? raw
        : raw.split(",").map((s) => s.trim()).filter(Boolean);
      else if (kind === "int" || kind === "float") {
        const n = Number(raw);
        // A number the browser refuses (badInput) or a non-finite one goes to sizing as text: it names the field.
        if (el.validity && el.validity.badInput) config[el.name] = "not a number";
        else config[el.name] = raw === "" ? null : Number.isFinite(n) ? n : raw;
      } else if (kind === "json" && raw !== "") {
        const parsed = parseJSON(el.value); // untrimmed: the line and column are where the visitor sees them
        if (parsed.error) local.push({ ...parsed.error, field: el.name });
        else {
          config.model_config = parsed.value;
          config.model = null;
        }
      }
    }
    return { config, local };
  }

  function toQuery() {
    const q = new URLSearchParams();
    for (const el of fields()) {
      if (el.dataset.kind === "bool") q.set(el.name, el.checked ? "true" : "false");
      else if (el.value.trim() !== "" || el.dataset.kind !== "json") q.set(el.name, el.value.trim());
    }
    return q.toString();
  }

  function setField(el, v) {
    if (el.dataset.kind === "bool") el.checked = v === "true" || v === "1";
    else if (el.tagName === "SELECT") {
      if (!Array.from(el.options).some((o) => o.value === v)) el.append(h("option", { value: v }, v));
      el.value = v;
    } else el.value = v;
  }

  function applyQuery(params) {
    for (const el of fields()) if (params.has(el.name)) setField(el, params.get(el.name));
  }

  // The form adapts to the model picked (calc_adapt.js) and says what it changed, under the model's select.
  const adapter = makeAdapter(form);
  const adapted = h("p", { id: "calc-adapted", class: "calc-adapted", "data-testid": "adapted", role: "status" });
  const modelField = form.querySelector('[name="model"]');
  (modelField.closest(".calc-field") || modelField).after(adapted);
  let adaptedFor = null; // the model the form last adapted to
  let linkFields = new Set(); // the fields the opened link gave: kept until the visitor picks another model
  function adaptForm() {
    if (modelField.value === adaptedFor) return;
    adaptedFor = modelField.value;
    const notes = adapter.adapt(linkFields);
    linkFields = new Set();
    const value = (name, v) => (name === "max_seq_length" && Number.isFinite(Number(v)) ? fmt.num(Number(v), 0) : v);
    adapted.textContent = notes.map(({ key, params }) => fmt.fill(t(key), {
      ...params, value: value(params.field, params.value), field: t("f_" + params.field) })).join(" ");
  }

  // A configuration object (an imported report's): its fields, the defaults for the rest, as URL text.
  function applyConfig(config) {
    const text = (v) => (v === null || v === undefined ? "" : Array.isArray(v) ? v.join(",")
      : typeof v === "object" ? JSON.stringify(v) : String(v));
    for (const el of fields()) {
      const v = el.name in config ? config[el.name] : el.dataset.kind === "json" ? "" : data.defaults[el.name];
      // model: null beside a config.json keeps the select; a tristate's null is its "framework default" option
      if (el.tagName === "SELECT" && el.dataset.kind !== "tristate" && (v === null || v === undefined)) continue;
      setField(el, text(v));
    }
  }

  // --- status and errors ----------------------------------------------------------------------------------
  // The status line says what the numbers below are: the build's default configuration (loading), being
  // recomputed (busy), this configuration's (ready), none because sizing refused it (refused) or the
  // build's numbers after the runtime failed (failed). Numbers that are not the form's are greyed.
  const refusal = h("p", { id: "calc-refusal", class: "calc-error calc-refusal", "data-testid": "refusal",
    role: "alert" });
  const retry = h("button", { type: "button", class: "md-button calc-retry", id: "calc-retry",
    "data-testid": "retry", hidden: "" }, t("retry"));
  (document.getElementById("calc-results") || status).before(refusal);
  status.after(retry);
  let runtimeReady = false;
  let failed = false;

  function setStatus(state, text) {
    status.dataset.state = state;
    status.textContent = text;
  }
  function stale(yes) {
    const results = document.getElementById("calc-results");
    if (results) results.classList.toggle("calc-stale", yes);
  }
  // Numbers of another configuration that are not even shown greyed: a link's own are being computed (the
  // default configuration's would be read as its).
  function hide(yes) {
    const results = document.getElementById("calc-results");
    if (results) results.classList.toggle("calc-pending", yes);
    if (yes) doc.dataset.computing = "1";
    else delete doc.dataset.computing;
  }
  // What the status says while no answer of the runtime is on the page: the build's numbers of the default
  // configuration, or of this link (prerendered), or none yet ("computing your configuration").
  function waiting() {
    if (failed) return;
    const query = toQuery();
    const own = query !== defaultQuery;
    const pre = own && query === shownQuery && prerendered;
    const refused = own && query === refusedQuery; // the build's refusal is in sight (no other numbers)
    setStatus("loading", t(refused ? "status_prerendered_refused" : pre ? "status_prerendered"
      : own ? "status_link" : "status_static"));
    stale(own && !pre);
    hide(own && !pre);
  }

  function clearErrors() {
    for (const el of root.querySelectorAll("[data-error-for]")) el.textContent = "";
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    general.textContent = "";
    refusal.textContent = "";
  }
  // A refusal in the page's language only (sizing's English message stays out), next to its field and
  // where the numbers are; `keep` leaves the numbers as they are (they still belong to the form).
  function showError(err, keep = false) {
    const params = err.params || {};
    const field = err.field || "";
    // a refusal that names the value it wants has its own words (e_conflict_expected: "use method lora")
    const key = "expected" in params && "e_" + err.code + "_expected" in L ? "e_" + err.code + "_expected"
      : "e_" + err.code;
    let text = t(key);
    if (text === key) text = t("e_other");
    text = fmt.fill(text, { ...params, field });
    const slot = field ? root.querySelector(`[data-error-for="${CSS.escape(field)}"]`) : null;
    (slot || general).textContent = text;
    const input = field ? form.querySelector(`[name="${CSS.escape(field)}"]`) : null;
    if (input) input.setAttribute("aria-invalid", "true");
    refusal.textContent = text;
    refusal.dataset.code = String(err.code);
    if (keep) return;
    stale(true);
    if (runtimeReady && !failed) setStatus("refused", t("status_refused"));
  }

  // --- the worker -----------------------------------------------------------------------------------
  let latest = 0;
  let latestQuery = "";
  let pending = 0; // the compute sent and not fully answered yet
  let reportId = 0;
  let timer = null; // a compute waiting for the typing to pause (schedule)
  // An edit after a pause is computed at once; edits that follow it within PAUSE_MS are typing, computed once
  // the typing pauses (the worker drops a configuration overtaken by a newer one between its answers anyway).
  // A fixed 60 ms wait before every compute used to delay each single edit (a select, a spin button, a paste).
  const PAUSE_MS = 60;
  let typingUntil = 0;
  let current = null; // the configuration of the latest answer
  let snippet = "";
  let defaultQuery = ""; // the form as the build filled it: the numbers first painted are its
  let shownQuery = ""; // the configuration whose numbers are on the page
  let answered = false; // the runtime has put numbers on the page
  let measured = {}; // from an imported trial report, for the rental request
  let measuredFor = null; // ...while the form still holds the report's configuration (its query)
  let prerendered = false; // the numbers on the page are the build's answer for a link (prerender.py)
  let fullShown = false; // the runtime has put a fit table on the page
  let refusedQuery = null; // the link whose refusal, computed when the site was built, is on the page
  let heard = false; // the runtime has answered the form (numbers or a refusal)

  function fail(reason, detail) {
    failed = true;
    runtimeReady = false;
    pending = 0;
    if (progress) progress.hidden = true;
    doc.dataset.runtime = "failed";
    const why = reason in L ? t(reason) : t("error");
    const built = answered ? "" : " " + t(prerendered ? "status_build_link" : "status_build_numbers");
    setStatus("failed", t("status_failed") + why + (reason === "http" && detail ? ` (${detail})` : "") + built);
    status.dataset.detail = `${reason}: ${detail || ""}`; // for the curious, not shown
    stale(toQuery() !== shownQuery);
    hide(false); // the build's numbers, greyed when they are not the form's
    retry.hidden = false;
    retry.disabled = false;
  }

  function showReport(answer) {
    const old = document.getElementById("calc-report");
    const panel = reportPanel(answer, t, fmt);
    if (old) old.replaceWith(panel);
    else document.getElementById("calc-report-slot").append(panel);
    measured = answer.ok ? measuredParams(answer.comparison) : {};
    measuredFor = null;
    if (answer.ok) {
      applyConfig(answer.config);
      adaptedFor = modelField.value; // the report's configuration ran: nothing to adapt
      adapted.textContent = "";
      measuredFor = toQuery();
      schedule();
    }
    linkRequest();
  }

  // The runtime is up: whatever was asked meanwhile is answered, or the last refusal stands.
  function onReady(msg) {
    runtimeReady = true;
    if (progress) progress.hidden = true;
    doc.dataset.bootMs = String(Math.round(msg.ms));
    doc.dataset.bootStages = JSON.stringify({ worker_created: Math.round(startedAt || -1), ...(msg.stages || {}) });
    if (pending) {
      doc.dataset.runtime = "busy";
      const query = toQuery();
      setStatus("busy", t(query === refusedQuery ? "status_prerendered_refused" : query !== shownQuery ? "status_link"
        : prerendered ? "status_prerendered" : "status_busy"));
    } else {
      doc.dataset.runtime = "ready";
      setStatus(refusal.textContent ? "refused" : "ready", t(refusal.textContent ? "status_refused" : "status_ready"));
    }
  }

  // The worker's answers, in order: the peak, the fit table's verdicts, the whole table (worker.js).
  const PHASE_MS = { estimate: "estimateMs", table: "tableMs", full: "computeMs" };

  function onResult(msg) {
    let result;
    try {
      result = JSON.parse(msg.json);
    } catch {
      result = { ok: false, error: { code: "internal", params: {} } };
    }
    clearErrors();
    prerendered = false; // the runtime's answer, whatever it says, replaces the build's
    refusedQuery = null;
    heard = true;
    delete doc.dataset.prerendered;
    if (result.ok) {
      show(result, latestQuery);
      answered = true;
      if (msg.phase === "full") fullShown = true;
    } else {
      hide(false);
      showError(result.error);
    }
    doc.dataset[PHASE_MS[msg.phase] || "computeMs"] = String(Math.round(msg.ms));
    doc.dataset.shown = String(msg.id); // the peak on the page is this configuration's
    if (msg.phase !== "estimate") doc.dataset.tableShown = String(msg.id); // and the fit table's verdicts
    if (msg.phase !== "full") return; // "ready" once the whole fit table is there too
    pending = 0;
    doc.dataset.runtime = "ready";
    // navigation -> the runtime's first complete answer (the benchmark's figure)
    if (!doc.dataset.readyAt) doc.dataset.readyAt = String(Math.round(performance.now()));
    if (result.ok) setStatus("ready", t("status_ready"));
  }

  // An answer's numbers on the page. A link's peak comes before its fit table: until the runtime has shown
  // one, the table kept from the first paint is the default configuration's and stays out of sight.
  function show(result, query) {
    renderResults(result.view);
    snippet = result.snippet;
    current = result.estimate.config; // the complete normalised configuration: what `sizing config` prints
    shownQuery = query;
    hide(false);
    if (!fullShown && query !== defaultQuery) {
      for (const part of document.querySelectorAll("#calc-results > .calc-stale")) part.classList.add("calc-pending");
    }
  }

  // A link the site itself contains: its first answer, computed when the site was built by the same code
  // (scripts/sitebuild/prerender.py), shown marked as such until the runtime confirms it.
  function keyHash(text) { // FNV-1a over UTF-16 code units, as prerender.key_hash
    let value = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) value = Math.imul(value ^ text.charCodeAt(i), 0x01000193) >>> 0;
    return value.toString(16).padStart(8, "0");
  }
  async function prerender(query) {
    const hash = keyHash(query);
    if (query === defaultQuery || !(data.prerendered || []).includes(hash)) return;
    let answer = null;
    try {
      const early = (window.calcBoot || {}).pre; // asked for from the top of <head> (calculator_slots.boot_script)
      const found = early && early.hash === hash ? await early.answer
        : await fetch(new URL(`pre/${data.lang}/${hash}.json`, import.meta.url)).then((r) => (r.ok ? r.json() : {}));
      answer = Object.hasOwn(found, query) ? JSON.parse(found[query]) : null;
    } catch {
      return; // the runtime's answer will do
    }
    // only while nothing newer is on the page or in the form
    if (!answer || failed || answered || heard || toQuery() !== query || shownQuery === query) return;
    if (!answer.ok) { // the build's refusal, in the page's language, where the numbers are
      clearErrors();
      showError(answer.error);
      refusedQuery = query;
      doc.dataset.prerendered = "1";
      if (runtimeReady) setStatus("busy", t("status_prerendered_refused"));
      else waiting();
      return;
    }
    show(answer, query);
    prerendered = true;
    doc.dataset.prerendered = "1";
    stale(false);
    if (runtimeReady) setStatus("busy", t("status_prerendered"));
    else waiting();
  }

  function attach(w) {
    w.onerror = (event) => fail("error", event.message || "worker error");
    w.onmessage = (event) => {
      const msg = event.data || {};
      if (msg.type === "failed") fail(msg.reason, msg.detail);
      else if (msg.type === "progress" && progress) progress.value = msg.percent;
      else if (msg.type === "ready") onReady(msg);
      else if (msg.type === "report" && msg.id === reportId) showReport(JSON.parse(msg.json));
      // an answer that comes while an edit waits for its compute (the typing pause, `timer`) is not the form's: the
      // old numbers stay greyed and the status busy until the form's own answer, never "ready" in between
      else if (msg.type === "result" && msg.id === latest && timer === null) onResult(msg);
    };
  }

  if (!worker) {
    fail("no_worker", String(workerError));
    retry.hidden = true; // a browser without module workers: trying again cannot help
  } else attach(worker);
  let worker_ = worker;

  // After a failed load: a fresh worker (and fresh downloads), the form's configuration asked again.
  retry.addEventListener("click", () => {
    if (worker_) worker_.terminate();
    const made = newWorker();
    if (!made.worker) {
      fail("no_worker", String(made.error));
      return;
    }
    worker_ = made.worker;
    attach(worker_);
    failed = false;
    retry.hidden = true;
    if (progress) {
      progress.hidden = false;
      progress.value = 0;
    }
    doc.dataset.runtime = "loading";
    delete doc.dataset.readyAt;
    compute();
  });

  function compute() {
    timer = null;
    let config;
    let local;
    try {
      ({ config, local } = readForm());
    } catch {
      ({ config, local } = { config: {}, local: [{ code: "internal", field: null, params: {} }] });
    }
    current = config;
    latest += 1;
    latestQuery = toQuery();
    let text = null;
    if (!local.length) {
      try {
        text = JSON.stringify(config);
      } catch {
        local.push({ code: "json_too_deep", field: "model_config", params: { max: 64 } });
      }
    }
    if (local.length || failed) {
      pending = 0;
      clearErrors();
      local.forEach((err) => showError(err)); // with the runtime up: status "refused"
      if (failed) stale(latestQuery !== shownQuery);
      else if (runtimeReady) {
        doc.dataset.runtime = "ready";
        if (!local.length) setStatus("ready", t("status_ready"));
      } else setStatus("loading", t("status_static")); // the refusal is shown, the runtime still loads
      return;
    }
    pending = latest;
    if (!runtimeReady) waiting();
    worker_.postMessage({ type: "compute", id: latest, config: text, words });
  }

  function schedule() {
    // The address and the request link follow the form even while the runtime loads or after it failed.
    const query = toQuery();
    history.replaceState(null, "", "?" + query + location.hash);
    linkRequest(query);
    if (failed) {
      compute(); // the form's own refusals still show; the numbers are greyed when they are not the form's
      return;
    }
    // The form asked already (a select's "change" after its "input", a field's "change" as it loses focus):
    // its compute is sent, its answers are on their way or on the page.
    if (timer === null && query === latestQuery) {
      if (runtimeReady && !pending) doc.dataset.runtime = "ready"; // a file read again that changed nothing
      return;
    }
    if (runtimeReady) {
      doc.dataset.runtime = "busy";
      setStatus("busy", t("status_busy"));
      stale(true); // not the form's numbers any more: greyed until its peak comes (its fit table until that comes)
    } else waiting();
    if (timer) clearTimeout(timer);
    timer = null;
    const typing = performance.now() < typingUntil;
    if (typing) timer = setTimeout(compute, PAUSE_MS);
    else compute();
    // the pause counts from the end of this edit's own work: a key that waited behind it (a busy page) is typing
    typingUntil = performance.now() + PAUSE_MS;
  }

  function linkRequest(query = toQuery()) {
    const link = document.getElementById("calc-request");
    // Measured figures belong to the report's configuration: once the form differs, they are not sent
    // and the report is marked stale.
    const same = measuredFor !== null && query === measuredFor;
    const panel = document.getElementById("calc-report");
    if (panel && panel.dataset.status !== "error") panel.classList.toggle("calc-stale", !same);
    const extra = same ? new URLSearchParams(measured).toString() : "";
    if (link) link.setAttribute("href", "request/?" + query + (extra ? "&" + extra : ""));
  }

  // --- buttons --------------------------------------------------------------------------------------
  const copied = document.getElementById("calc-copied");
  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const area = h("textarea", { readonly: "", class: "calc-offscreen" });
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    copied.textContent = t("copied");
    setTimeout(() => { copied.textContent = ""; }, 2000);
  }
  document.getElementById("calc-copy-snippet").addEventListener("click", () => copy(snippet));
  // The trial recipe's command for this configuration, with the downloaded config.json: Accelerate starts
  // one process per GPU when there are several.
  function trialCommand() {
    const config = current || readForm().config;
    const gpus = Number.isInteger(config.num_gpus) && config.num_gpus > 1 ? config.num_gpus : 1;
    if (gpus === 1) return "python " + TRIAL;
    const sharding = SHARDING_CONFIG[config.parallelism];
    return `accelerate launch ${sharding ? `--config_file ${sharding} ` : ""}--num_processes ${gpus} ${TRIAL}`;
  }
  document.getElementById("calc-copy-trial").addEventListener("click", () => copy(trialCommand()));
  document.getElementById("calc-download").addEventListener("click", () => {
    const config = current || readForm().config;
    const blob = new Blob([JSON.stringify(config, null, 2) + "\n"], { type: "application/json" });
    const a = h("a", { href: URL.createObjectURL(blob), download: "config.json" });
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  });
  // Helpers of the form that are not fields of the configuration: their events stop here, so they do
  // not reach the form's listeners (no recompute, nothing in the URL).
  const search = document.getElementById("calc-model-search");
  const modelSelect = form.querySelector('[name="model"]');
  for (const type of ["input", "change"]) search.addEventListener(type, (event) => event.stopPropagation());
  function filterModels(pick = true) {
    const words = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    let first = null;
    for (const option of modelSelect.options) {
      const text = (option.value + " " + option.textContent).toLowerCase();
      option.hidden = !words.every((w) => text.includes(w));
      if (!option.hidden && !first) first = option;
    }
    if (pick && first && modelSelect.selectedOptions[0] && modelSelect.selectedOptions[0].hidden) {
      modelSelect.value = first.value;
      adaptForm();
      schedule();
    }
  }
  search.addEventListener("input", () => filterModels());
  const upload = document.getElementById("calc-model-config-file");
  // A file input fires "input" before "change": both stop here, or the form's recompute would clear the
  // refusal of a file that is too big a moment after it is shown.
  upload.addEventListener("input", (event) => event.stopPropagation());
  upload.addEventListener("change", async (event) => {
    event.stopPropagation();
    const file = upload.files && upload.files[0];
    if (!file) return;
    if (file.size > MAX_CONFIG_BYTES) {
      clearErrors();
      showError({ code: "config_too_big", field: "model_config", params: {} }, true); // the form is unchanged
      return;
    }
    if (runtimeReady) doc.dataset.runtime = "busy"; // at once: reading the file takes a moment
    form.querySelector('[name="model_config"]').value = await file.text();
    schedule();
  });
  const reportFile = document.getElementById("calc-report-file");
  async function importReport() {
    const file = reportFile.files && reportFile.files[0];
    if (!file) return;
    reportId += 1;
    if (file.size > MAX_REPORT_BYTES) {
      showReport({ ok: false, error: { code: "report_too_big", params: {} } });
      return;
    }
    if (worker_) worker_.postMessage({ type: "report", id: reportId, text: await file.text() });
  }
  reportFile.addEventListener("change", importReport);

  // --- start: the query wins over the defaults; compute at once (the worker queues until ready) ------
  if (!failed) doc.dataset.runtime = "loading";
  defaultQuery = toQuery();
  shownQuery = defaultQuery;
  const opened = new URLSearchParams(location.search);
  applyQuery(opened);
  linkFields = new Set(fields().map((el) => el.name).filter((name) => opened.has(name)));
  adaptForm(); // a link that names a model and not, say, its length gets a length the model takes
  prerender(toQuery());
  linkRequest();
  // Before the recompute: a model picked adapts the form, a field edited is the visitor's own from then on.
  const edited = (event) => {
    const name = event.target && event.target.name;
    if (name === "model") adaptForm();
    else if (name) adapter.own(name);
  };
  form.addEventListener("input", edited);
  form.addEventListener("change", edited);
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("submit", (event) => event.preventDefault());
  compute();
  doc.classList.remove("calc-link"); // the numbers in sight are the form's, or hidden as not its (waiting)
  // Back on this page, the browser may restore the chosen report file and the catalog search text after
  // this script has run: read the report again, filter the list again (the model stays the URL's).
  const restored = () => {
    if (reportId === 0 && reportFile.files && reportFile.files.length) importReport();
    if (search.value) filterModels(false);
  };
  restored();
  window.addEventListener("load", restored);
  window.addEventListener("pageshow", restored);
  if (worker) replay(); // what the worker said before this script took it over
}

// The calculator's Web Worker: self-hosted Pyodide + the `sizing` wheel + calc_bridge.py.
// Messages in: {type: "compute", id, config: JSON text}. Out: {type: "ready", ms} once booted,
// {type: "failed", reason, detail} when the runtime cannot load, {type: "result", id, json, ms}.
const HERE = self.location.href;
const BASE = new URL("../pyodide/", HERE).href;
const TIMEOUT_MS = 60000;

class BootError extends Error {
  constructor(reason, detail) { super(detail || reason); this.reason = reason; this.detail = detail || ""; }
}

async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new BootError("http", `${response.status} ${url}`);
  return response;
}

async function boot() {
  const t0 = performance.now();
  const manifest = await (await fetchOk(new URL("runtime.json", HERE))).json();
  if (!manifest.installed) throw new BootError("not_installed", manifest.message || "");
  // A wrong .wasm MIME type makes loadPyodide hang forever: check it first.
  const head = await fetch(BASE + "pyodide.asm.wasm", { method: "HEAD" });
  const type = (head.headers.get("content-type") || "").split(";")[0].trim();
  if (!head.ok) throw new BootError("http", `${head.status} pyodide.asm.wasm`);
  if (type !== "application/wasm") throw new BootError("bad_mime", `Content-Type: ${type || "none"}`);
  const wheelP = fetchOk(new URL(manifest.wheel, BASE)).then((r) => r.arrayBuffer());
  const bridgeP = fetchOk(new URL("calc_bridge.py", HERE)).then((r) => r.text());
  const { loadPyodide } = await import(BASE + "pyodide.mjs");
  const options = { indexURL: BASE, stdout: () => {}, stderr: () => {} };
  if (manifest.stdlib) options.stdLibURL = BASE + manifest.stdlib; // precompiled .pyc: about 2 s faster
  const py = await loadPyodide(options);
  const sitePackages = py.runPython("import site; site.getsitepackages()[0]");
  py.unpackArchive(new Uint8Array(await wheelP), "wheel", { extractDir: sitePackages });
  py.FS.mkdirTree("/home/pyodide/calc");
  py.FS.writeFile("/home/pyodide/calc/calc_bridge.py", await bridgeP);
  py.runPython("import sys; sys.path.insert(0, '/home/pyodide/calc')");
  const bridge = py.pyimport("calc_bridge");
  return { bridge, ms: performance.now() - t0 };
}

function withTimeout(promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new BootError("timeout", `${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const runtime = withTimeout(boot()).then(
  (rt) => { self.postMessage({ type: "ready", ms: rt.ms }); return rt; },
  (err) => {
    self.postMessage({ type: "failed", reason: err.reason || "error", detail: String(err.detail || err.message || err) });
    return null;
  },
);

let newest = 0;

function run(bridge, config, table) {
  const t0 = performance.now();
  let json;
  try {
    json = bridge.compute_json(config, table);
  } catch (err) {
    json = JSON.stringify({ ok: false, error: { code: "internal", field: null, message: String(err), params: {} } });
  }
  return { json, ms: performance.now() - t0 };
}

// Two answers per configuration: the estimate at once ("estimate"), then with the fit table over every
// GPU ("full"), skipped when a newer configuration arrived in between.
self.onmessage = async (event) => {
  const msg = event.data || {};
  if (msg.type !== "compute") return;
  newest = Math.max(newest, msg.id);
  const rt = await runtime;
  if (!rt || msg.id !== newest) return;
  const config = String(msg.config);
  const first = run(rt.bridge, config, false);
  self.postMessage({ type: "result", phase: "estimate", id: msg.id, ...first });
  await new Promise((resolve) => setTimeout(resolve, 0)); // let a newer message in
  if (msg.id !== newest || !JSON.parse(first.json).ok) {
    if (msg.id === newest) self.postMessage({ type: "result", phase: "full", id: msg.id, ...first });
    return;
  }
  self.postMessage({ type: "result", phase: "full", id: msg.id, ...run(rt.bridge, config, true) });
};

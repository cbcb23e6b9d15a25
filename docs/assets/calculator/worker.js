// The calculator's Web Worker: self-hosted Pyodide + the `sizing` wheel (its Python API: sizing.web).
// Messages in: {type: "compute", id, config: JSON text}, {type: "report", id, text: a trial report}.
// Out: {type: "ready", ms, stages} once booted, {type: "failed", reason, detail} when the runtime cannot
// load, {type: "progress", percent} while the snapshot arrives, {type: "result", phase, id, json, ms},
// {type: "report", id, json}.
const HERE = self.location.href;
const BASE = new URL("../pyodide/", HERE).href;
// No fixed limit on the whole load (12 MB take minutes on a slow link): a download that gets no byte for
// STALL_MS fails, and so does a start that has nothing left to download yet is not up START_MS later.
const STALL_MS = 20000;
const START_MS = 90000;

class BootError extends Error {
  constructor(reason, detail) { super(detail || reason); this.reason = reason; this.detail = detail || ""; }
}

// Every download of the boot, Pyodide's own included, goes through countingFetch: `open` requests are
// waiting for headers or bytes, `lastByte` is when one last arrived (the watchdog's clock).
let open = 0;
let lastByte = performance.now();
const networkFetch = self.fetch.bind(self);
async function countingFetch(input, init) {
  open += 1;
  lastByte = performance.now();
  let closed = false;
  const close = () => {
    if (!closed) {
      closed = true;
      open -= 1;
      lastByte = performance.now();
    }
  };
  let response;
  try {
    response = await networkFetch(input, init);
  } catch (err) {
    close();
    throw err;
  }
  lastByte = performance.now();
  if (!response.body || response.status < 200) {
    close();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream({
    async pull(controller) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        close();
        throw err;
      }
      if (chunk.done) {
        close();
        controller.close();
        return;
      }
      lastByte = performance.now();
      controller.enqueue(chunk.value);
    },
    cancel(reason) {
      close();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
self.fetch = countingFetch;

// The boot, or a BootError when a download stalls or the start hangs.
function watched(promise) {
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      const idle = performance.now() - lastByte;
      if (open > 0 && idle > STALL_MS) {
        reject(new BootError("stalled", `${Math.round(idle / 1000)} s without data, ${open} download(s) open`));
      } else if (open === 0 && idle > START_MS) reject(new BootError("timeout", `${START_MS / 1000} s`));
    }, 1000);
    promise.then(resolve, reject).finally(() => clearInterval(timer));
  });
}

async function fetchOk(url) {
  const response = await fetch(url);
  if (!response.ok) throw new BootError("http", `${response.status} ${url}`);
  return response;
}

// A response body (inflated here if `gzip`: a copy the server sends as plain bytes), read as it arrives into
// a buffer of the size runtime.json announces.
async function readInto(response, size, gzip) {
  const out = new Uint8Array(size);
  const reader = (gzip ? response.body.pipeThrough(new DecompressionStream("gzip")) : response.body).getReader();
  let at = 0;
  let told = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    out.set(value, at); // a RangeError here (more bytes than announced) fails the snapshot: plain boot
    at += value.length;
    const percent = Math.floor((100 * at) / size); // the largest download: the page's progress bar
    if (percent >= told + 5) {
      told = percent;
      self.postMessage({ type: "progress", percent });
    }
  }
  if (at !== size) throw new BootError("snapshot", `${at} of ${size} bytes`);
  return out;
}

// The heap without its zero pages (scripts/sitebuild/heap_pack.py) -> the heap: allocate it zeroed, copy the runs.
function unpackHeap(packed) {
  const view = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  if (view.getUint32(0, true) !== 0x31504843) throw new BootError("snapshot", "not a packed heap"); // "CHP1"
  const length = view.getUint32(4, true);
  const page = view.getUint32(8, true);
  const runs = view.getUint32(12, true);
  const heap = new Uint8Array(length);
  let at = 16 + 8 * runs;
  for (let i = 0; i < runs; i++) {
    const start = view.getUint32(16 + 8 * i, true) * page;
    const size = Math.min(view.getUint32(20 + 8 * i, true) * page, length - start);
    heap.set(packed.subarray(at, at + size), start);
    at += size;
  }
  if (at !== packed.length) throw new BootError("snapshot", "packed heap has trailing bytes");
  return heap;
}

// What a returning visitor's boot would otherwise download and decode again, kept in the Cache API under names
// with this build's ids (runtime.json: snapshot_id, wasm_id), so a new build never gets an old copy: the packed
// heap (15 MB, brotli-decoded) and the wasm (9.6 MB). Written once the page has its first answer, read at the
// next boot. Without the Cache API (an insecure origin, storage off) every boot downloads them.
const KEEP_CACHE = "calc-runtime";
const toKeep = new Map(); // key -> bytes (a Uint8Array or a Blob promise)
const keepKey = (name, id) => (id && self.caches ? new URL(`${name}?id=${id}`, BASE).href : null);

async function keptResponse(key) {
  if (!key) return null;
  try {
    return (await (await caches.open(KEEP_CACHE)).match(key)) || null;
  } catch {
    return null;
  }
}

// Everything kept goes (a copy that did not restore must not be tried again at the next boot).
function forgetKept() {
  toKeep.clear();
  if (self.caches) caches.delete(KEEP_CACHE).catch(() => {});
}

async function keepAll() {
  const entries = Array.from(toKeep);
  toKeep.clear();
  if (!entries.length) return;
  try {
    const cache = await caches.open(KEEP_CACHE);
    const wanted = new Set(entries.map(([key]) => key));
    for (const old of await cache.keys()) if (!wanted.has(old.url)) await cache.delete(old); // an earlier build's
    await Promise.all(entries.map(async ([key, bytes]) => {
      const type = key.includes(".wasm") ? "application/wasm" : "application/octet-stream";
      await cache.put(key, new Response(await bytes, { headers: { "Content-Type": type } }));
    }));
  } catch {
    // full storage or none: the next visit downloads them again
  }
}

// After a restore: zipimport reads the directory of the zip actually loaded (stdlib_trim.lazy_stdlib).
const REREAD_ZIP = `import sys as _sys, zipimport as _zi
[f.invalidate_caches() for f in list(_sys.path_importer_cache.values()) if isinstance(f, _zi.zipimporter)]
del _sys, _zi`;
// After the wheel is unpacked: the path finders list their folders again (an import tried before found none).
const REREAD_DIRS = `import sys as _sys
[f.invalidate_caches() for f in list(_sys.path_importer_cache.values()) if hasattr(f, "invalidate_caches")]
del _sys`;

// Milliseconds since the worker started, per boot stage (the benchmark prints them).
const stages = {};
const mark = (name) => { stages[name] = Math.round(performance.now()); };

// A GET of `plain` that also answers how the server sends it: its response when the server sends it with a
// Content-Encoding (the browser decodes it as it arrives and keeps it in its cache as sent), else null (its
// body cancelled: the caller fetches the -gzip.bin copy and inflates it). One request instead of a HEAD and
// a GET.
async function encodedGet(url) {
  const response = await fetchOk(url);
  if (response.headers.get("content-encoding")) return response;
  response.body.cancel().catch(() => {});
  return null;
}

async function boot() {
  const t0 = performance.now();
  // The manifest, the wasm and pyodide.mjs in parallel (each waits for the one before it only here).
  const wasmAbort = new AbortController(); // not needed when the wasm was kept
  const wasmP = fetch(BASE + "pyodide.asm.wasm", { signal: wasmAbort.signal });
  const moduleP = import(BASE + "pyodide.mjs");
  // Pyodide's Emscripten module (1.2 MB of JavaScript): loadPyodide imports it only once the heap is in; asked
  // for here, it is fetched and compiled while the wasm compiles and the heap arrives, and loadPyodide's own
  // import of the same URL gets this module.
  const asmP = import(BASE + "pyodide.asm.mjs");
  wasmP.catch(() => {});
  moduleP.catch(() => {});
  asmP.then(() => mark("asm_mjs"), () => {});
  const manifest = await (await fetchOk(new URL("runtime.json", HERE))).json();
  mark("manifest");
  if (!manifest.installed) throw new BootError("not_installed", manifest.message || "");
  const snapshotOn = Boolean(manifest.snapshot && manifest.stdlib && manifest.snapshot_packed_bytes);
  // What an earlier visit kept (keepAll): no request, no decoding.
  const heapKey = snapshotOn ? keepKey(manifest.snapshot_plain || manifest.snapshot, manifest.snapshot_id) : null;
  const wasmKey = keepKey("pyodide.asm.wasm", manifest.wasm_id);
  const [keptHeapResponse, keptWasm] = await Promise.all([keptResponse(heapKey), keptResponse(wasmKey)]);
  // read while the wasm compiles (a wrong size fails the restore: the plain boot, and the copies are forgotten)
  const kept = keptHeapResponse ? keptHeapResponse.arrayBuffer().then((buffer) => {
    if (buffer.byteLength !== manifest.snapshot_packed_bytes) throw new BootError("snapshot", "kept heap size");
    mark("heap_kept");
    return new Uint8Array(buffer);
  }) : null;
  const heapP = snapshotOn && !kept && manifest.snapshot_plain
    ? encodedGet(BASE + manifest.snapshot_plain).catch(() => null) : Promise.resolve(null);
  let wasmResponseP;
  let wasmEncoded = true;
  if (keptWasm) {
    mark("wasm_kept");
    wasmAbort.abort();
    wasmResponseP = Promise.resolve(keptWasm);
  } else {
    // A wrong .wasm MIME type makes loadPyodide hang forever: check it first.
    const head = await wasmP;
    const type = (head.headers.get("content-type") || "").split(";")[0].trim();
    if (!head.ok) throw new BootError("http", `${head.status} pyodide.asm.wasm`);
    if (type !== "application/wasm") throw new BootError("bad_mime", `Content-Type: ${type || "none"}`);
    // A server that compresses (Content-Encoding) gets the plain names. Otherwise the -gzip.bin copies, inflated
    // here.
    wasmEncoded = Boolean(head.headers.get("content-encoding")) || !manifest.wasm_gzip;
    if (wasmEncoded) wasmResponseP = Promise.resolve(head);
    else {
      head.body.cancel().catch(() => {});
      wasmResponseP = fetchOk(BASE + manifest.wasm_gzip).then((r) => new Response(
        r.body.pipeThrough(new DecompressionStream("gzip")), { headers: { "Content-Type": "application/wasm" } }));
    }
    if (wasmKey) { // one copy of the bytes for the compile, one for the Cache API
      wasmResponseP = wasmResponseP.then((r) => {
        const [compile, keep] = r.body.tee();
        toKeep.set(wasmKey, new Response(keep).blob());
        return new Response(compile, { headers: { "Content-Type": "application/wasm" } });
      });
    }
  }
  // Compiled as it arrives, while the heap still does (Pyodide would start only once the heap is in).
  const wasmModuleP = wasmResponseP.then((r) => WebAssembly.compileStreaming(r));
  wasmModuleP.then(() => mark("wasm_compiled"), () => {});
  const heapResponse = await heapP;
  mark(`encoded_${wasmEncoded ? 1 : 0}${heapResponse ? 1 : 0}`);
  const wheelP = fetchOk(new URL(manifest.wheel, BASE)).then((r) => r.arrayBuffer());
  wheelP.catch(() => {});
  // The memory snapshot (made at build time with sizing.web imported) skips Python's start-up.
  // Without it (or if it fails to restore) boot from scratch.
  const snapshotP = !snapshotOn ? null : kept ? kept.then(unpackHeap)
    : (heapResponse ? Promise.resolve(heapResponse) : fetchOk(BASE + manifest.snapshot))
      .then((r) => readInto(r, manifest.snapshot_packed_bytes, !heapResponse))
      .then((packed) => {
        mark("snapshot_inflated");
        if (heapKey) toKeep.set(heapKey, packed);
        return unpackHeap(packed);
      });
  if (snapshotP) snapshotP.then(() => mark("heap"), () => {});
  // Pyodide instantiates pyodide.asm.wasm itself (instantiateStreaming of its own fetch): hand it the module
  // compiled above, and its fetch of the wasm a response that costs nothing (the bytes are here already).
  // Before each loadPyodide: a plain boot after a failed restore uses the same module.
  const wasmURL = BASE + "pyodide.asm.wasm";
  const plainFetch = self.fetch.bind(self);
  const instantiateStreaming = WebAssembly.instantiateStreaming;
  const handWasm = () => {
    self.fetch = (input, init) => {
      if (String(input instanceof Request ? input.url : input) !== wasmURL) return plainFetch(input, init);
      self.fetch = plainFetch;
      return Promise.resolve(new Response(new Uint8Array(0), { headers: { "Content-Type": "application/wasm" } }));
    };
    WebAssembly.instantiateStreaming = async (source, imports) => {
      WebAssembly.instantiateStreaming = instantiateStreaming;
      const module = await wasmModuleP;
      return { module, instance: await WebAssembly.instantiate(module, imports) };
    };
  };
  const { loadPyodide } = await moduleP;
  mark("pyodide_mjs");
  const options = { indexURL: BASE, stdout: () => {}, stderr: () => {} };
  if (manifest.lock_info) options.lockFileContents = { info: manifest.lock_info, packages: {} };
  if (manifest.stdlib) options.stdLibURL = BASE + manifest.stdlib; // precompiled .pyc: about 2 s faster
  let py = null;
  if (snapshotP) {
    try {
      // The heap holds every module the calculator imports; the zip it comes with has only the others, and
      // the heap's copy of the zip's directory describes the full zip: re-read it before any import.
      const stdLibURL = manifest.snapshot_stdlib ? BASE + manifest.snapshot_stdlib : options.stdLibURL;
      handWasm();
      py = await loadPyodide({ ...options, stdLibURL, _loadSnapshot: snapshotP });
      mark("loaded"); // Pyodide's own restore done; then the zip's directory is read again (40-130 ms under Node)
      if (manifest.snapshot_stdlib) py.runPython(REREAD_ZIP);
    } catch (err) {
      py = null; // a stale or unreadable snapshot: the plain boot below still answers
    }
  }
  const restored = py !== null;
  mark(restored ? "restored" : "snapshot_failed");
  if (!restored) {
    if (kept || keptWasm) forgetKept();
    handWasm();
    py = await loadPyodide(options);
  }
  // The snapshot holds the heap, not the file system: the package files go back for anything read lazily,
  // after the page's first estimate (the heap holds every module that needs) unless the heap is missing.
  const rt = { py, bridge: null, ms: 0, unpacked: null, unpackDone: false };
  // once the page has its first complete answer: nothing the visitor waits for competes with the write
  rt.keep = () => {
    if (restored) keepAll(); // a heap or wasm that failed to restore is not kept
    else forgetKept();
    rt.keep = () => {};
  };
  rt.unpack = () => {
    if (!rt.unpacked) {
      rt.unpacked = wheelP.then((wheel) => {
        const sitePackages = py.runPython("import site; site.getsitepackages()[0]");
        py.unpackArchive(new Uint8Array(wheel), "wheel", { extractDir: sitePackages });
        py.runPython(REREAD_DIRS);
        rt.unpackDone = true;
        mark("wheel");
      });
    }
    return rt.unpacked;
  };
  if (!restored) await rt.unpack();
  rt.bridge = py.pyimport("sizing.web");
  mark("bridge");
  rt.ms = performance.now() - t0;
  return rt;
}

const runtime = watched(boot()).then(
  (rt) => { self.postMessage({ type: "ready", ms: rt.ms, stages }); return rt; },
  (err) => {
    forgetKept();
    self.postMessage({ type: "failed", reason: err.reason || "error", detail: String(err.detail || err.message || err) });
    return null;
  },
);

let newest = 0;

// A bridge call's JSON answer; an error the bridge did not turn into a refusal becomes one (code "internal").
function call(fn) {
  const t0 = performance.now();
  let json;
  try {
    json = fn();
  } catch (err) {
    json = JSON.stringify({ ok: false, error: { code: "internal", field: null, message: String(err), params: {} } });
  }
  return { json, ms: performance.now() - t0 };
}

// `words` (the page's words, JSON text): the answer then carries the results view in them (sizing.view).
// Without the table: the peak (sizing.web.compute's peak: the own GPU's searches come with the table).
// searches=false: the table's verdicts without each card's largest micro-batch and longest sequence.
function run(bridge, config, table, words, searches = true) {
  return call(() => bridge.compute_json(config, table, words, !table, searches));
}

// A bridge call made before the wheel is unpacked that failed inside (an import the heap lacks: code
// "internal") is made again once it is.
async function settled(rt, made) {
  // an unpack under way (the wheel may still be downloading) is waited for: only after it is an "internal" final
  if (rt.unpackDone || JSON.parse(made.json).ok || JSON.parse(made.json).error.code !== "internal") return made;
  await rt.unpack();
  return null;
}

// run(), made again once the wheel is unpacked when it needed a module the heap lacks (settled()).
async function answer(rt, config, table, words, searches = true) {
  return (await settled(rt, run(rt.bridge, config, table, words, searches)))
    || run(rt.bridge, config, table, words, searches);
}

// Three answers per configuration: the estimate at once ("estimate"), the fit table's verdicts, fewest GPUs and
// times ("table": tens of ms), then the whole table with each card's largest micro-batch and longest sequence and
// the ladder ("full": most of the cost, the searches), each skipped when a newer configuration arrived in between. What the boot left for later (the
// wheel's files, then keeping the heap and wasm for the next visit) waits until the first answers are out.
self.onmessage = async (event) => {
  const msg = event.data || {};
  if (msg.type === "report") {
    const rt = await runtime;
    if (!rt) return;
    await rt.unpack();
    const { json } = call(() => rt.bridge.report_json(String(msg.text)));
    self.postMessage({ type: "report", id: msg.id, json });
    return;
  }
  if (msg.type !== "compute") return;
  clearTimeout(tail); // the visitor is editing: the boot's tail waits until the answers are out
  newest = Math.max(newest, msg.id);
  const rt = await runtime;
  if (!rt || msg.id !== newest) return;
  const config = String(msg.config);
  const words = typeof msg.words === "string" ? msg.words : null;
  const first = await answer(rt, config, false, words);
  self.postMessage({ type: "result", phase: "estimate", id: msg.id, ...first });
  await new Promise((resolve) => setTimeout(resolve, 0)); // let a newer message in
  if (msg.id !== newest || !JSON.parse(first.json).ok) {
    if (msg.id === newest) self.postMessage({ type: "result", phase: "full", id: msg.id, ...first });
    afterAnswers(rt, null, words);
    return;
  }
  // The fit table before the wheel's files are unpacked when the heap holds all it needs (always for the build's
  // default configuration, whose answer is in the heap): the first load is ready without waiting for the unpack.
  const verdicts = await answer(rt, config, true, words, false);
  if (msg.id !== newest) return;
  self.postMessage({ type: "result", phase: "table", id: msg.id, ...verdicts });
  await new Promise((resolve) => setTimeout(resolve, 0)); // let a newer message in
  if (msg.id !== newest) return;
  const full = await answer(rt, config, true, words);
  self.postMessage({ type: "result", phase: "full", id: msg.id, ...full });
  afterAnswers(rt, config, words);
};

// After the answers: the heap and wasm are kept for the next visit at once (asynchronous writes to the Cache API,
// which a visitor who leaves a second later should still get), while the work that holds the worker (unpacking the
// wheel's files, the warm-up estimate) runs TAIL_MS after the last answer, not right after it: an edit made the
// moment the page is ready used to wait behind it (bench_calculator's "new peak", cold: 0.51 s against 0.20 s a
// second later). A compute message that comes first puts it off again. Nothing the page shows needs it: the heap
// holds every module an estimate imports, and a call that misses one unpacks first (settled()).
const TAIL_MS = 1500;
let tail = 0;
function afterAnswers(rt, config, words) {
  rt.keep();
  clearTimeout(tail);
  tail = setTimeout(async () => {
    await rt.unpack();
    if (config !== null) warmUp(rt, config, words);
  }, TAIL_MS);
}

// Once, after the first complete answer and unless the page asks again meanwhile: the estimate of a neighbouring
// configuration (one rank higher), answered to nobody. In a fresh runtime the engine's first estimate costs 2-3
// times a later one, for any model (cold caches, wasm code not yet optimised; measured under Node: 1.7 s, then
// 1.1 s for another model, 0.5 s for a third); the visitor's first edit should not be the one to pay it. In
// Chromium the gain is small: a first edit 4 s after ready, 3 runs each, was 0.36-0.39 s to the new peak
// (0.97-1.69 s to the table) with it and 0.38-0.47 s (1.09-1.99 s) without for another model; no difference
// for another rank.
let warmed = false;
function warmUp(rt, config, words) {
  if (warmed) return;
  warmed = true;
  const asked = newest;
  setTimeout(() => {
    if (newest !== asked) return; // the visitor's own configuration warms it up instead
    const near = JSON.parse(config);
    if (!Number.isInteger(near.r)) return;
    near.r += 1;
    call(() => rt.bridge.compute_json(JSON.stringify(near), false, words, true));
  }, 50);
}

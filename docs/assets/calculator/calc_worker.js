// The page's Web Worker (worker.js): the one the inline script at the top of <head> started
// (window.calcBoot, which queues what the worker says until a page script takes it over), or a new one.

/** A new worker.js ({worker} or {error}): the retry after a failed load starts one. */
export function newWorker() {
  try {
    return { worker: new Worker(new URL("worker.js", import.meta.url), { type: "module" }), error: null };
  } catch (err) {
    return { worker: null, error: err };
  }
}

/** The early-started worker, or a new one, and replay() for what it said before the page listened. */
export function pageWorker() {
  const early = window.calcBoot || {};
  let worker = early.worker || null;
  let error = early.error || null;
  if (!worker && !error) ({ worker, error } = newWorker());
  // Hand what the worker said before the handlers were set (a failure, "ready") to those handlers.
  function replay() {
    for (const event of (early.queue || []).splice(0)) {
      if (event.type === "message") worker.onmessage(event);
      else worker.onerror(event);
    }
  }
  return { worker, error, startedAt: early.at, replay };
}

// Restores the calculator's memory snapshot under Node as worker.js does (the page's lazy stdlib zip,
// then worker.js's REREAD_ZIP), computes each input of INPUTS.json and imports a module the heap lacks.
// Usage: node restore_node.mjs HEAP.raw STDLIB.zip WHEEL INPUTS.json REREAD.py
import { readFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [heap, stdlib, wheel, inputs, reread] = process.argv.slice(2);
const require = createRequire(path.resolve("package.json"));
const indexURL = path.dirname(require.resolve("pyodide/package.json")) + path.sep;
const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
const py = await loadPyodide({ indexURL, stdLibURL: stdlib, _loadSnapshot: new Uint8Array(readFileSync(heap)),
  stdout: () => {}, stderr: () => {} });
py.runPython(readFileSync(reread, "utf8"));
const site = py.runPython("import site; site.getsitepackages()[0]");
py.unpackArchive(new Uint8Array(readFileSync(wheel)), "wheel", { extractDir: site });
const calc = py.pyimport("sizing.web");
const work = JSON.parse(readFileSync(inputs, "utf8"));
const answers = work.configs.map((text) => calc.compute_json(text));
const reports = work.reports.map((text) => calc.report_json(text));
// the default configuration as each page asks for it (remembered in the heap at build time), with the time
const paged = (work.paged || []).map(([text, words]) => {
  const t0 = performance.now();
  const answer = calc.compute_json(text, true, words);
  return [answer, performance.now() - t0];
});
const remembered = py.runPython("len(__import__('sizing.web').web._REMEMBERED)");
// a text codec the calculator never imported: read from the lazy zip after the directory was re-read
const codec = py.runPython("import codecs; codecs.lookup('cp1251').name");
process.stdout.write(JSON.stringify({ answers, reports, codec, paged, remembered }));

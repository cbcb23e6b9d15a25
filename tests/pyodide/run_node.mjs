// Runs sizing.web.compute_json under Pyodide in Node for each configuration, and report_json for each
// trial report, of INPUTS.json ({configs: [...], reports: [...]}, JSON texts) and prints the answers as
// JSON. Usage: node run_node.mjs WHEEL INPUTS.json [STDLIB.zip] (the page's trimmed stdlib)
import { readFileSync } from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [wheel, configs, stdlib] = process.argv.slice(2);
const require = createRequire(path.resolve("package.json"));
const indexURL = path.dirname(require.resolve("pyodide/package.json")) + path.sep;
const { loadPyodide } = await import(path.join(indexURL, "pyodide.mjs"));
const t0 = performance.now();
const py = await loadPyodide({ indexURL, ...(stdlib ? { stdLibURL: stdlib } : {}), stdout: () => {}, stderr: () => {} });
const site = py.runPython("import site; site.getsitepackages()[0]");
py.unpackArchive(new Uint8Array(readFileSync(wheel)), "wheel", { extractDir: site });
const calc = py.pyimport("sizing.web");
// the installed wheel's version from its dist-info (importlib.metadata is not in the page's trimmed stdlib)
py.globals.set("site_packages", site);
const version = py.runPython("import sys, glob; d = glob.glob(site_packages + '/sizing-*.dist-info'); "
  + "f'{sys.version_info[0]}.{sys.version_info[1]} ' + d[0].split('sizing-')[1].removesuffix('.dist-info')");
const inputs = JSON.parse(readFileSync(configs, "utf8"));
const answers = inputs.configs.map((text) => calc.compute_json(text));
const reports = inputs.reports.map((text) => calc.report_json(text));
process.stdout.write(JSON.stringify({ version, boot_ms: performance.now() - t0, answers, reports }));

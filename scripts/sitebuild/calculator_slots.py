# The calculator's placeholders -> slots in the page Markdown -> their HTML in the built pages, and the CSP.
"""The Markdown (and so the page's Markdown copy, llms-full.txt and the search index) gets a slot for each
calculator placeholder: empty for the forms, the default results as Markdown tables for the results
(calculator_copy.py turns them into Markdown for the copy). `add_csp` (on_post_build) puts the real HTML
into the built pages with fill_slots, where nothing rewrites it any more, starts their worker from the top
of <head> and adds a Content-Security-Policy <meta>: 'self', 'wasm-unsafe-eval' and the hashes of the
inline scripts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sitebuild.calculator_pages import _script_src as script_src
from sitebuild.calculator_pages import (
    default_result,
    form_html,
    params_slot,
    request_html,
    results_block,
    results_markdown,
    with_csp,
)
from sitebuild.calculator_text import TEXT
from sitebuild.pyodide_runtime import CALC_DIR
from sitebuild.sizing_blocks import Handler

CALC_PAGE = re.compile(r"(^|/)calculator/(request/)?index\.html$")
SLOT = re.compile(r'<div data-calc-slot="(\w+)" data-lang="([\w-]+)"[^>]*>(.*?)</div>', re.S)


def _form_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return f'<div data-calc-slot="form" data-lang="{lang}"></div>'


def _request_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return f'<div data-calc-slot="request" data-lang="{lang}"></div>'


def _results_slot(_: list[str], kw: dict[str, Any], lang: str) -> str:
    return (f'<div data-calc-slot="results" data-lang="{lang}" markdown>\n\n'
            f"{results_markdown(default_result(), lang)}\n\n</div>")


def link_script(lang: str, depth: int = 1) -> str:
    """A classic inline script right after the first-paint results (hashed into the CSP): on a page opened on a
    link (boot_script's `calc-link` mark) it says at once, in the page's language, that the link's configuration
    is being computed, with the default configuration's numbers out of sight; when the top of <head> found the
    link's prerendered answer (calcBoot.pre), it shows those numbers, marked as the build's, as soon as the
    answer and the page's renderer (calc_render.js, preloaded) are in: before calculator.js runs (deferred, it
    waits for the whole form and for Material's bundle). calculator.js then takes over as for any link; until
    it has, `calc-link` stays on the page, so a late answer never overwrites what calculator.js put there."""
    def text(key: str) -> str:
        return json.dumps(TEXT[key][lang]).replace("</", "<\\/")

    render = json.dumps(script_src(lang, "calc_render.js", depth))
    return ("<script>(function(){var d=document.documentElement,b=window.calcBoot||{},"
            's=document.getElementById("calc-status"),r=document.getElementById("calc-results");'
            'if(!d.classList.contains("calc-link")||!s||!r)return;'
            'd.dataset.runtime="loading";s.dataset.state="loading";s.textContent=' + text("status_link") + ";"
            'r.classList.add("calc-stale","calc-pending");d.dataset.computing="1";'
            "var p=b.pre;if(!p)return;"
            # FNV-1a over UTF-16 code units, as calculator.js's keyHash: the answer file's key must be this link's
            "function f(t){var h=2166136261,i;for(i=0;i<t.length;i++)h=Math.imul(h^t.charCodeAt(i),16777619)>>>0;"
            'return("0000000"+h.toString(16)).slice(-8)}'
            "Promise.all([p.answer,p.render||import(" + render + ")]).then(function(v){"
            "var k=Object.keys(v[0]||{}).filter(function(x){return f(x)===p.hash});"
            'if(k.length!==1||!d.classList.contains("calc-link"))return;'
            # a refusal: calculator.js shows it, in its words
            "var a=JSON.parse(v[0][k[0]]);if(!a.ok||!a.view||!v[1])return;"
            "v[1].renderResults(a.view);"
            'document.querySelectorAll("#calc-results > .calc-stale").forEach(function(e){'
            'e.classList.add("calc-pending")});'  # the first paint's fit table is the default's
            "s.textContent=" + text("status_prerendered") + ';d.dataset.prerendered="1";delete d.dataset.computing'
            "}).catch(function(){})})()</script>")


def _results(lang: str) -> str:
    return results_block(lang) + link_script(lang)


SLOT_HTML: dict[str, Callable[[str], str]] = {"form": form_html, "results": _results, "request": request_html}


def boot_script(lang: str, depth: int = 1, early: Mapping[str, str] | None = None) -> str:
    """Pyodide boots in the worker while the rest of the page (stylesheets, theme scripts, calculator.js)
    loads: this classic inline script, first in <head> (hashed into the CSP), starts it before anything
    else and keeps its messages until calculator.js takes the worker over. With `early` ({hash of a query as
    a link writes it: hash of its prerendered answer}, prerender.write) it also asks for the answer of an
    address the site links to, which calculator.js then finds ready (calcBoot.pre)."""
    worker = json.dumps(script_src(lang, "worker.js", depth))
    script = ("<script>try{var w=new Worker(" + worker + ',{type:"module"}),q=[];'
              "w.onmessage=w.onerror=function(e){q.push(e)};window.calcBoot={worker:w,queue:q,at:performance.now()}}"
              "catch(e){window.calcBoot={error:e}}")
    if early is not None:
        # a link: no first-paint numbers in sight until calculator.js knows whether they are the link's
        script += 'try{if(location.search.length>1)document.documentElement.classList.add("calc-link")}catch(e){}'
        pre = json.dumps(script_src(lang, "pre/" + lang + "/", depth))
        script += ("try{var s=location.search.slice(1),h=2166136261,i;for(i=0;i<s.length;i++)"
                   "h=Math.imul(h^s.charCodeAt(i),16777619)>>>0;var k=" + json.dumps(dict(early))
                   + '[("0000000"+h.toString(16)).slice(-8)];if(k)window.calcBoot.pre={hash:k,answer:fetch('
                   + pre + '+k+".json").then(function(r){return r.ok?r.json():{}}).catch(function(){return{}}),'
                   # the renderer too, evaluated while the stylesheets load: link_script then renders with no wait
                   "render:import(" + json.dumps(script_src(lang, "calc_render.js", depth))
                   + ").catch(function(){return null})}}catch(e){}")
    return script + "</script>"


ASSETS = Path(__file__).resolve().parents[2] / "docs" / CALC_DIR
IMPORT = re.compile(r'^import [^;]*? from "\./([\w.-]+\.js)";', re.M)


def module_graph(name: str) -> list[str]:
    """A page module and every module it imports, in the order found (docs/assets/calculator/)."""
    seen = [name]
    for module in seen:
        seen += [m for m in IMPORT.findall((ASSETS / module).read_text("utf-8")) if m not in seen]
    return seen


def preloads(lang: str) -> str:
    """<link rel=modulepreload> for calculator.js and its imports: fetched with the page's first requests, not
    one import level after another once the parser has reached the end of the form."""
    return "".join(f'<link rel="modulepreload" href="{script_src(lang, m)}">' for m in module_graph("calculator.js"))


def fill_slots(page: str, prerendered: Mapping[str, str] | None = None) -> str:
    """Replace the calculator slots of a built page with their HTML (the form knows which links the build
    prerendered: prerender.write's mapping); the calculator and the request page start their worker from the
    top of <head>."""
    slot = re.search(r'<div data-calc-slot="(form|request)" data-lang="([\w-]+)"', page)
    hashes = sorted(set((prerendered or {}).values()))
    fill = lambda m: form_html(m.group(2), hashes) if m.group(1) == "form" else SLOT_HTML[m.group(1)](m.group(2))  # noqa: E731
    page = SLOT.sub(fill, page)
    if slot:
        form = slot.group(1) == "form"
        boot = boot_script(slot.group(2), 1 if form else 2, (prerendered or {}) if form else None)
        boot += preloads(slot.group(2)) if form else ""
        page = re.sub(r"<head>", lambda _: "<head>\n  " + boot, page, count=1)
    return page


def add_csp(site_dir: Path, prerendered: Mapping[str, str] | None = None) -> list[Path]:
    """The calculator pages, finished: their slots filled (fill_slots), then the CSP <meta> added."""
    done = []
    for path in sorted(site_dir.rglob("index.html")):
        rel = path.relative_to(site_dir).as_posix()
        if CALC_PAGE.search(rel):
            text = path.read_text("utf-8")
            if 'http-equiv="Content-Security-Policy"' not in text:
                path.write_text(with_csp(fill_slots(text, prerendered)), "utf-8")
            done.append(path)
    return done


# The calculator's placeholders; hooks.py renders pages with these next to sizing_blocks.HANDLERS.
HANDLERS: dict[str, Handler] = {
    "calculator_form": _form_slot,
    "calculator_results": _results_slot,
    "calculator_request": _request_slot,
    "calculator_params": params_slot,
}

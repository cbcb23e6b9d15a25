"""The calculator in Chromium: first-paint numbers, the Pyodide runtime, recomputation, shared URLs,
hostile input, no foreign requests, no console errors. Each page load boots Pyodide (5-9 s on 2 cores),
so the tests are few and each does several checks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from sitebuild import calculator_pages
from sizing.config import normalize
from sizing.memory.timeline import COMPONENTS

ROOT = Path(__file__).resolve().parents[2]


READY = 90_000  # ms: a cold Pyodide boot on a loaded 2-core machine


class Watched:
    """A page plus what it did: requests to other origins, console errors, uncaught errors."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.origin = urlsplit(base_url).netloc
        self.foreign: list[str] = []
        self.errors: list[str] = []
        page.on("request", self._request)
        page.on("console", self._console)
        page.on("pageerror", lambda err: self.errors.append(f"pageerror: {err}"))

    def _request(self, request: Any) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != self.origin:
            self.foreign.append(request.url)

    def _console(self, msg: Any) -> None:
        # Every console error counts: Material's sitemap.xml lookups next to each hreflang alternate (3-5
        # 404s per page) are narrowed away at build time (scripts/sitebuild/client_fixes.py).
        if msg.type == "error":
            self.errors.append(f"console: {msg.text}")


@pytest.fixture
def watched(browser: Any, base_url: str) -> Iterator[Watched]:
    context = browser.new_context()
    # Every Content-Security-Policy violation on the page (a blocked inline style or script included).
    context.add_init_script("document.addEventListener('securitypolicyviolation', (e) => "
                            "(window.__csp = window.__csp || []).push(e.violatedDirective + ' ' + e.blockedURI))")
    page = context.new_page()
    page.set_default_timeout(READY)
    yield Watched(page, base_url)
    context.close()


def expected(config: dict[str, Any]) -> dict[str, Any]:
    result = calculator_pages.bridge().compute(json.loads(json.dumps(config)))
    assert result["ok"], result
    return dict(result)


def shown(page: Any) -> dict[str, int]:
    values = {key: int(page.get_attribute(f"[data-testid=peak-{key}]", "data-bytes"))
              for key in ("allocated", "reserved", "device")}
    for name in COMPONENTS:
        values[name] = int(page.get_attribute(f"[data-testid=component-{name}]", "data-bytes"))
    return values


def want(result: dict[str, Any]) -> dict[str, int]:
    est = result["estimate"]
    values = {key: est["peak"][f"{key}_bytes"] for key in ("allocated", "reserved", "device")}
    values.update({name: est["components"][name] for name in COMPONENTS})
    return values


def wait_ready(page: Any) -> None:
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)


def test_first_paint_runtime_and_recompute(watched: Watched, base_url: str) -> None:
    page = watched.page
    default = calculator_pages.default_config()
    page.goto(base_url + "en/calculator/", wait_until="domcontentloaded")
    assert shown(page) == want(expected(default))  # build-time numbers, before the runtime answers
    first_paint = page.inner_text("#calc-results")
    wait_ready(page)
    assert page.inner_text("#calc-results") == first_paint  # the runtime renders what the build rendered
    assert shown(page) == want(expected(default))
    stages = json.loads(page.get_attribute("html", "data-boot-stages") or "{}")
    assert "restored" in stages and "snapshot_failed" not in stages, stages  # booted from the memory snapshot
    assert page.is_hidden("#calc-progress") and int(page.eval_on_selector("#calc-progress", "p => p.value")) >= 95
    rows = page.locator("[data-testid=fit-table] tbody tr").count()
    assert rows == len(expected(default)["fit_table"])

    page.fill("#calc-r", "64")
    page.fill("#calc-max_seq_length", "2048")
    page.select_option("#calc-optim", "paged_adamw_8bit")
    wait_ready(page)
    changed = {**default, "r": 64, "max_seq_length": 2048, "optim": "paged_adamw_8bit"}
    assert shown(page) == want(expected(changed))
    query = urlsplit(page.url).query
    assert "r=64" in query and "max_seq_length=2048" in query and "target_modules=all-linear" in query
    with page.expect_download() as download:
        page.click("#calc-download")
    # the download is the complete normalised configuration, as `python -m sizing config` prints it
    assert json.loads(Path(download.value.path()).read_text("utf-8")) == normalize(changed)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("#calc-copy-snippet")
    page.wait_for_selector("#calc-copied:not(:empty)")
    snippet = page.evaluate("navigator.clipboard.readText()")
    assert "LoraConfig(" in snippet and "r=64," in snippet and "bnb_4bit_quant_type='nf4'" in snippet
    assert "optim='paged_adamw_8bit'" in snippet and "BitsAndBytesConfig(" in snippet
    policy = page.get_attribute("meta[http-equiv=Content-Security-Policy]", "content")
    assert "unsafe-inline" not in policy and "default-src 'self'" in policy
    assert page.evaluate("window.__csp || []") == []
    assert not watched.errors, watched.errors
    page.evaluate("document.getElementById('calc-status').setAttribute('style', 'color: red')")  # the control
    page.wait_for_function("() => (window.__csp || []).some((v) => v.startsWith('style-src'))")
    assert page.evaluate("getComputedStyle(document.getElementById('calc-status')).color") != "rgb(255, 0, 0)"
    page.evaluate("window.__csp = []")
    page.wait_for_timeout(100)
    watched.errors.clear()  # the control's own console report
    page.click("#calc-copy-trial")
    assert page.evaluate("navigator.clipboard.readText()") == (
        "python trial.py config.json --data data.jsonl --out trial-out --max-steps 20")
    page.fill("#calc-num_gpus", "4")
    page.select_option("#calc-parallelism", "fsdp")
    wait_ready(page)
    page.click("#calc-copy-trial")
    assert page.evaluate("navigator.clipboard.readText()") == ("accelerate launch --config_file fsdp.yaml "
                                                               "--num_processes 4 trial.py config.json --data "
                                                               "data.jsonl --out trial-out --max-steps 20")
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors


def test_shared_url_reproduces_the_result(watched: Watched, base_url: str) -> None:
    page = watched.page
    config = {**calculator_pages.default_config(), "model": "Qwen/Qwen2.5-14B", "method": "lora",
              "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "per_device_train_batch_size": 2,
              "num_gpus": 2, "parallelism": "fsdp", "price_per_gpu_hour": 3.5}
    query = {k: ("true" if v is True else "false" if v is False else ",".join(v) if isinstance(v, list)
                 else "" if v is None else str(v)) for k, v in config.items()}
    page.goto(base_url + "calculator/?" + urlencode(query), wait_until="domcontentloaded")
    wait_ready(page)
    assert page.input_value("#calc-target_modules") == "q_proj,k_proj,v_proj,o_proj"
    result = expected(config)
    assert shown(page) == want(result)
    assert page.text_content("[data-testid=cost]") != "—"
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors


def test_hostile_input_shows_errors_and_injects_nothing(watched: Watched, base_url: str) -> None:
    page = watched.page
    page.goto(base_url + "uz/calculator/", wait_until="domcontentloaded")
    wait_ready(page)
    before = shown(page)
    # warnings and the H100/H200 comparison in the page's language
    assert "cho‘qqining" in page.text_content("[data-testid=warnings] li[data-code=logits_dominate]")
    assert page.locator("[data-testid=compare] thead th").count() == 3
    assert "Ushbu konfiguratsiya uchun H100 va H200" in page.text_content("[data-testid=compare]")
    hostile = json.dumps({"model_type": "<img src=x onerror=\"window.__pwned=1\">", "hidden_size": "<b>4096</b>",
                          "num_hidden_layers": 1e308, "architectures": ["<script>window.__pwned=2</script>"]})
    page.fill("#calc-model_config", hostile)
    wait_ready(page)
    assert page.text_content("[data-testid=error-model_config]") or page.text_content("[data-testid=error-general]")
    page.fill("#calc-model_config", "{\"hidden_size\": ")  # not JSON
    wait_ready(page)
    assert page.text_content("[data-testid=error-model_config]")
    page.fill("#calc-model_config", "")
    page.fill("#calc-r", "1e999")
    wait_ready(page)
    assert page.text_content("[data-testid=error-r]")
    page.fill("#calc-r", "16")
    page.fill("#calc-target_modules", "<svg onload=window.__pwned=4>,q_proj")
    wait_ready(page)
    assert page.text_content("[data-testid=error-target_modules]")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#calc img, #calc svg[onload], #calc script:not([type])").count() == 0
    assert shown(page) == before  # the last good result stays (marked stale)
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors


@pytest.mark.parametrize(("server", "message"), [("bad_wasm_url", "application/wasm"),
                                                  ("not_installed_url", "calculator runtime not installed")])
def test_a_runtime_that_cannot_load_fails_clearly(browser: Any, server: str, message: str,
                                                  request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue(server)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url + "en/calculator/", wait_until="domcontentloaded")
        page.wait_for_selector("html[data-runtime=failed]", timeout=READY)
        assert message in page.text_content("[data-testid=runtime-status]")
        assert int(page.get_attribute("[data-testid=peak-allocated]", "data-bytes")) > 0  # first paint stays
    finally:
        context.close()


def test_a_snapshot_from_another_build_falls_back_to_a_plain_boot(browser: Any, stale_snapshot_url: str) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(stale_snapshot_url + "en/calculator/", wait_until="domcontentloaded")
        page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
        stages = json.loads(page.get_attribute("html", "data-boot-stages") or "{}")
        assert "snapshot_failed" in stages and "restored" not in stages, stages
        assert shown(page) == want(expected(calculator_pages.default_config()))  # the trimmed stdlib suffices
        page.fill("#calc-r", "64")
        wait_ready(page)
        assert shown(page) == want(expected({**calculator_pages.default_config(), "r": 64}))
    finally:
        context.close()


def test_rental_request_from_the_calculator_refuses_secrets(watched: Watched, base_url: str) -> None:
    page = watched.page
    page.goto(base_url + "en/calculator/", wait_until="domcontentloaded")
    page.fill("#calc-r", "32")
    with page.expect_navigation(url="**/en/calculator/request/**"):
        page.click("[data-testid=request-link]")
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
    assert "r=32" in urlsplit(page.url).query and page.url.split("?")[0].endswith("/en/calculator/request/")
    text = page.text_content("[data-testid=request-text]")
    assert "r=32" in text and "meta-llama/Llama-3.1-8B" in text and "GiB" in text
    page.fill("#req-model_revision", "0e9e39f")
    assert "0e9e39f" in page.text_content("[data-testid=request-text]")
    page.fill("#req-notes", "HF token: hf_" + "a1B2c3D4e5F6g7H8i9J0kLmN")
    assert page.text_content("[data-testid=error-notes]")
    shown_text = page.text_content("[data-testid=request-text]")
    assert "hf_a1B2" not in shown_text and page.get_attribute("[data-testid=request-text]", "data-refused") == "true"
    assert page.is_disabled("#req-copy")
    page.fill("#req-notes", "<img src=x onerror=window.__pwned=1> needs NVLink")
    assert "<img src=x" in page.text_content("[data-testid=request-text]")  # shown as text
    assert page.evaluate("window.__pwned") is None and page.locator("#req img").count() == 0
    # a configuration sizing refuses: the request says why, in the page's language
    page.goto(base_url + "calculator/request/?r=x", wait_until="domcontentloaded")
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
    assert "оценка не получена: Неверный тип значения поля r (r)" in page.text_content("[data-testid=request-text]")
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors


def trial_report(config: dict[str, Any], message: str) -> dict[str, Any]:
    """A trial report as docs/recipes/trial.py writes one (the parts sizing.report reads)."""
    gib = 2**30
    steps = [{"step": n, "completed": True, "seconds": s, "tokens": 4096, "micro_batches": 1, "loss": 1.0,
              "host_max_rss_bytes": 3 * gib, "max_memory_allocated_bytes": 9 * gib + n,
              "max_memory_reserved_bytes": 10 * gib, "device_used_bytes": 11 * gib, "device_source": "pynvml",
              "reason": None} for n, s in ((1, 9.0), (2, 4.0), (3, 5.0))]
    return {"schema_version": 1, "status": "ok", "message": message, "failure": None, "rank": 0, "world_size": 1,
            "config": config, "measurements": {"steps": steps, "peaks": None, "before_train": {
                "allocated_bytes": 6 * gib, "reserved_bytes": 10 * gib, "reason": None}},
            "checks": {"reload_matches": True, "eval_loss_before": 2.5, "eval_loss_after": 1.25}}


def test_an_imported_trial_report_shows_measured_next_to_estimated(watched: Watched, base_url: str,
                                                                     tmp_path: Path) -> None:
    page = watched.page
    config = {**calculator_pages.default_config(), "r": 32, "max_seq_length": 2048}
    text = json.dumps(trial_report(config, "<img src=x onerror=window.__pwned=1> trial completed"))
    want_cmp = json.loads(calculator_pages.bridge().report_json(text))
    assert want_cmp["ok"], want_cmp
    path = tmp_path / "report.json"
    path.write_text(text, "utf-8")
    page.goto(base_url + "en/calculator/", wait_until="domcontentloaded")
    wait_ready(page)
    page.set_input_files("[data-testid=report-file]", str(path))
    page.wait_for_selector("[data-testid=report][data-status=ok]")
    for name in ("allocated", "reserved", "device"):
        figure = want_cmp["comparison"]["figures"][name]
        row = f"[data-testid=report-{name}]"
        assert int(page.get_attribute(row, "data-estimated")) == figure["estimated_bytes"]
        assert int(page.get_attribute(row, "data-measured")) == figure["measured_bytes"]
    assert "4.50" in page.text_content("[data-testid=report-step]")  # median of 4 and 5 s: step 1 left out
    # the steps' reserved peak (10 GiB) is what was reserved before training: the page says so
    assert page.get_attribute("[data-testid=report-before-train]", "data-floor") == "true"
    assert page.text_content("[data-testid=report-message]").startswith("<img src=x")  # text, not markup
    assert page.evaluate("window.__pwned") is None and page.locator("#calc img").count() == 0
    # the report's configuration is in the form, and the page's estimate is for it
    assert page.input_value("#calc-r") == "32" and page.input_value("#calc-max_seq_length") == "2048"
    wait_ready(page)
    assert shown(page) == want(expected(config))
    # the rental request carries the measured figures
    with page.expect_navigation(url="**/en/calculator/request/**"):
        page.click("[data-testid=request-link]")
    page.wait_for_selector("html[data-runtime=ready]", timeout=READY)
    request = page.text_content("[data-testid=request-text]")
    assert "Measured by a trial run" in request and "10.0 GiB" in request and "4.50 s" in request
    # a changed configuration is no longer the measured one: the request link drops the figures
    page.go_back()  # the browser keeps the chosen file: the page reads it again
    page.wait_for_selector("[data-testid=report][data-status=ok]")
    wait_ready(page)
    assert "measured_reserved=" in page.get_attribute("[data-testid=request-link]", "href")
    page.fill("#calc-r", "8")
    wait_ready(page)
    assert "measured_" not in page.get_attribute("[data-testid=request-link]", "href")
    assert "calc-stale" in (page.get_attribute("[data-testid=report]", "class") or "")
    # a report of a run on a pasted config.json: the config goes into its field, the model list stays as it is
    tiny = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    custom = tmp_path / "custom.json"
    custom.write_text(json.dumps(trial_report({**config, "model": None, "model_config": tiny}, "ok")), "utf-8")
    page.set_input_files("[data-testid=report-file]", str(custom))
    page.wait_for_function("() => (document.querySelector('#calc-model_config') || {}).value")
    wait_ready(page)
    assert json.loads(page.input_value("#calc-model_config")) == tiny
    assert page.locator("#calc-model option[value='']").count() == 0
    assert shown(page) == want(expected({**config, "model": None, "model_config": tiny}))
    # a file that is not a report: a translated error, nothing else changes
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "status": "ok"}), "utf-8")
    page.set_input_files("[data-testid=report-file]", str(bad))
    page.wait_for_selector("[data-testid=report][data-status=error]")
    assert "not a trial report" in page.text_content("[data-testid=report-error]")
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors


def test_catalog_search_and_an_uploaded_config_json(watched: Watched, base_url: str, tmp_path: Path) -> None:
    page = watched.page
    page.goto(base_url + "calculator/", wait_until="domcontentloaded")
    wait_ready(page)
    before = urlsplit(page.url).query
    page.fill("[data-testid=model-search]", "qwen2.5 14b")
    wait_ready(page)
    assert page.input_value("#calc-model") == "Qwen/Qwen2.5-14B"
    assert "model-search" not in urlsplit(page.url).query and urlsplit(page.url).query != before
    assert shown(page) == want(expected({**calculator_pages.default_config(), "model": "Qwen/Qwen2.5-14B"}))
    visible = page.eval_on_selector_all("#calc-model option", "os => os.filter(o => !o.hidden).map(o => o.value)")
    assert visible and all("qwen2.5" in v.lower() and "14b" in v.lower() for v in visible)
    tiny = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
            "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
            "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny), "utf-8")
    page.set_input_files("[data-testid=model-config-file]", str(path))
    wait_ready(page)
    config = {**calculator_pages.default_config(), "model": None, "model_config": tiny}
    assert shown(page) == want(expected(config))
    assert not watched.foreign, watched.foreign
    assert not watched.errors, watched.errors


# The contract's tristate fields: bf16 / gradient_checkpointing can be left to the framework (null).
def test_framework_default_reaches_sizing_through_the_form_url_and_download(watched: Watched, base_url: str) -> None:
    page = watched.page
    page.goto(base_url + "en/calculator/", wait_until="domcontentloaded")
    wait_ready(page)
    assert page.input_value("#calc-gradient_checkpointing") == "true"  # the example sets it
    page.select_option("#calc-framework", "trl")
    page.select_option("#calc-gradient_checkpointing", "")  # the framework's default
    page.select_option("#calc-bf16", "")
    wait_ready(page)
    # the page sends null: sizing applies TRL's defaults (SFTConfig: bf16 and gradient checkpointing on)
    config: dict[str, Any] = {**calculator_pages.default_config(), "framework": "trl", "gradient_checkpointing": None,
                              "bf16": None}
    assert shown(page) == want(expected(config))
    query = urlsplit(page.url).query
    assert "gradient_checkpointing=&" in query + "&" and "bf16=&" in query + "&"
    with page.expect_download() as download:
        page.click("#calc-download")
    saved = json.loads(Path(download.value.path()).read_text("utf-8"))
    assert saved == normalize(config) and saved["gradient_checkpointing"] is True and saved["bf16"] is True
    page.goto(base_url + "en/calculator/?" + query, wait_until="domcontentloaded")  # the link restores the state
    wait_ready(page)
    assert page.input_value("#calc-bf16") == "" and shown(page) == want(expected(config))
    assert not watched.errors and not watched.foreign, (watched.errors, watched.foreign)

"""The build's prerendered calculator links (sitebuild/prerender.py) use the page's own key: the query
calculator.js writes for the form and its hash, both checked against the page's JavaScript run in Node."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from sitebuild import calculator_pages, calculator_slots, prerender
from sizing import web
from tests.needs import cannot_run

ROOT = Path(__file__).resolve().parents[2]
CALCULATOR = ROOT / "docs" / "assets" / "calculator" / "calculator.js"
NODE = shutil.which("node")

# values a link can carry: URL-special bytes, spaces, Cyrillic, the bytes form-encoding treats apart (* ~)
ODD = ["meta-llama/Llama-3.1-8B", "q_proj, v_proj", "a*b~c", "пароль 1+1=2", "x&y=z#w", ""]


def node(script: str) -> str:
    if NODE is None:
        cannot_run("node missing")
    proc = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60,
                          check=True)
    return proc.stdout


def test_the_key_hash_is_the_pages() -> None:
    found = re.search(r"function keyHash\(text\) \{.*?\n  \}\n", CALCULATOR.read_text("utf-8"), re.S)
    assert found, "calculator.js has no keyHash"
    texts = [*ODD, "model=meta-llama%2FLlama-3.1-8B&r=16", "😀 surrogate pair"]
    out = node(found.group(0) + f"console.log(JSON.stringify({json.dumps(texts)}.map(keyHash)));")
    assert json.loads(out) == [prerender.key_hash(t) for t in texts]
    assert prerender.key_hash("") == "811c9dc5"  # FNV-1a's offset basis: the hash of nothing


def test_the_key_is_the_query_urlsearchparams_writes() -> None:
    state = prerender.form_state({}) or {}
    for i, value in enumerate(ODD):
        state = {**state, "target_modules": value, "gpu": ODD[-1 - i]}
        pairs = [[name, value] for name, value in state.items() if name != "model_config" or value.strip()]
        script = ("const q = new URLSearchParams(); for (const [k, v] of " + json.dumps(pairs)
                  + ") q.set(k, k === 'gpu' ? v : v.trim()); console.log(q.toString());")
        assert prerender.form_query(state) == node(script).strip()


def test_the_form_state_and_configuration_of_a_link() -> None:
    defaults = calculator_pages.default_config()
    assert prerender.form_config(prerender.form_state({}) or {}) == defaults  # no query: the form as built
    state = prerender.form_state({"r": " 64 ", "lora_dropout": "0.1", "target_modules": "q_proj, v_proj,",
                                  "packing": "1", "use_dora": "yes", "num_gpus": "two", "bf16": "false",
                                  "gradient_checkpointing": "", "learning_rate": "3"})
    assert state is not None
    config = prerender.form_config(state)
    # by hand, from calculator.js: number inputs keep valid numbers only, "1" checks a box, "yes" does not
    assert config == {**defaults, "r": 64, "lora_dropout": 0.1, "target_modules": ["q_proj", "v_proj"],
                      "packing": True, "use_dora": False, "num_gpus": None, "bf16": False,
                      "gradient_checkpointing": None}
    assert isinstance(config["r"], int)
    assert prerender.form_state({"model_config": '{"model_type": "llama"}'}) is None  # pasted: not prerendered


def test_the_site_links_are_written_with_the_workers_first_answer(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "gpus").mkdir(parents=True)
    link = '<a href="../calculator/?gpu=L4-24GB&amp;r=8">x</a> <a href="../calculator/request/?r=9">y</a>'
    (site / "gpus" / "index.html").write_text(link + ' <a href="calculator/">plain</a>', "utf-8")
    early = prerender.write(site, tmp_path / "cache", catalog=False)
    state = prerender.form_state({"gpu": "L4-24GB", "r": "8"})
    assert state is not None
    key = prerender.form_query(state)
    hashes = sorted(set(early.values()))
    assert hashes == [prerender.key_hash(key)]  # the request page's link is not the calculator's
    # the link as written, and the page's own address once the form rewrites it, both find the answer
    assert early == {prerender.key_hash("gpu=L4-24GB&r=8"): hashes[0], hashes[0]: hashes[0]}
    for words in calculator_pages.page_words():
        lang = json.loads(words)["lang"]
        stored = json.loads((site / "assets/calculator/pre" / lang / f"{hashes[0]}.json").read_text("utf-8"))
        answer = json.loads(stored[key])
        assert answer == json.loads(web.compute_json(json.dumps(prerender.form_config(state)), False, words))
        assert answer["ok"] and answer["estimate"]["config"]["r"] == 8 and answer["fit_table"] is None
    again = prerender.write(site, tmp_path / "cache", catalog=False)  # from the cache
    assert again == early and len(list((tmp_path / "cache").iterdir())) == 1


def test_the_head_script_asks_for_the_answer_of_a_link_as_written() -> None:
    """calculator_slots.boot_script run in Node with a stand-in window: the URL it fetches for each address."""
    early = {prerender.key_hash("model=Qwen/Qwen2.5-14B&r=32"): "0badc0de"}
    script = calculator_slots.boot_script("en", 1, early).removeprefix("<script>").removesuffix("</script>")
    fetched = []
    for search in ("?model=Qwen/Qwen2.5-14B&r=32", "?model=Qwen/Qwen2.5-14B&r=33", ""):
        stub = ("globalThis.window = globalThis; globalThis.Worker = function () {}; globalThis.location = {search: "
                + json.dumps(search) + "}; let asked = null; globalThis.fetch = (u) => { asked = u; "
                "return Promise.resolve({ok: true, json: () => ({})}); }; const marked = [];"
                "globalThis.document = {documentElement: {classList: {add: (c) => marked.push(c)}}};")
        fetched.append(node(stub + script + "; console.log(JSON.stringify([asked, marked]));").strip())
    # a link hides the first paint's numbers (the default's) until calculator.js has looked at it
    assert fetched == ['["../../assets/calculator/pre/en/0badc0de.json",["calc-link"]]', '[null,["calc-link"]]',
                       "[null,[]]"]



ADAPT = ROOT / "docs" / "assets" / "calculator" / "calc_adapt.js"
# A stand-in form for calc_adapt.js, one per page (a list of steps): the model select (its option's data-* as
# the built form carries them), the length and method fields. A step sets fields, marks some as typed by the
# visitor, or picks a model; after each pick: the form's length and method and the notes' keys.
FORM = """
import { makeAdapter } from %s;
const methods = %s;
const pages = [];
for (const steps of %s) {
  const fields = {
    model: { value: "", selectedOptions: [] },
    max_seq_length: { value: "" },
    method: { value: "", options: methods.map((value) => ({ value })) },
  };
  const adapter = makeAdapter({ querySelector: (sel) => fields[/name="([^"]+)"/.exec(sel)[1]] || null });
  const out = [];
  for (const step of steps) {
    for (const [name, value] of Object.entries(step.set || {})) fields[name].value = value;
    for (const name of step.own || []) adapter.own(name);
    if (!step.option) continue;
    fields.model.value = step.option.id;
    fields.model.selectedOptions = [{ dataset: step.option.dataset }];
    const notes = adapter.adapt(new Set(step.keep || []));
    out.push({ length: fields.max_seq_length.value, method: fields.method.value, notes: notes.map((n) => n.key) });
  }
  pages.push(out);
}
console.log(JSON.stringify(pages));
"""


def _option(model: dict[str, object]) -> dict[str, object]:
    """A catalog model's option as the built form carries it (calculator_pages._limit_attrs)."""
    attrs = calculator_pages._limit_attrs(model)
    dataset = {}
    if found := re.search(r'data-max-seq="(\d+)"', attrs):
        dataset["maxSeq"] = found.group(1)
    if found := re.search(r'data-method="([^"]+)"', attrs):
        dataset["method"] = found.group(1)
    return {"id": model["id"], "dataset": dataset}


def _pages(pages: list[list[dict[str, object]]]) -> list[list[dict[str, object]]]:
    script = FORM % (json.dumps(ADAPT.as_uri()), json.dumps(list(prerender._METHODS)), json.dumps(pages))
    return json.loads(node(script))  # type: ignore[no-any-return]


def test_a_link_is_adapted_at_build_time_as_the_page_adapts_it() -> None:
    # every catalog model, as a link naming only the model and as one that also gives the length and method
    base = prerender.form_state({}) or {}
    models = {m["id"]: m for m in web.catalog()["models"]}
    links = [{"model": m} for m in models] + [{"model": m, "max_seq_length": "8192", "method": "full"} for m in models]
    pages = [[{"set": {"max_seq_length": link.get("max_seq_length", base["max_seq_length"]),
                       "method": link.get("method", base["method"])},
               "option": _option(models[link["model"]]), "keep": [k for k in link if k != "model"]}] for link in links]
    changed = 0
    for link, [got] in zip(links, _pages(pages), strict=True):
        state = prerender.form_state(link) or {}
        assert (got["length"], got["method"]) == (state["max_seq_length"], state["method"]), link
        changed += (got["length"], got["method"]) != (base["max_seq_length"], base["method"])
    assert changed >= 24 + len(models)  # the 18 short-context and 6 GPTQ models, and every link with method full


def test_the_form_adapts_to_each_model_and_puts_back_what_it_changed() -> None:
    models = {m["id"]: _option(m) for m in web.catalog()["models"]}
    llama, phi, gptq = (models[k] for k in ("meta-llama/Llama-3.1-8B", "microsoft/phi-2",
                                             "TheBloke/Mistral-7B-v0.1-GPTQ"))
    start = {"max_seq_length": "4096", "method": "qlora"}
    got = _pages([
        # picked in turn: phi-2 (2,048 tokens), the GPTQ Mistral (4,096, LoRA only), Llama 3.1 again
        [{"set": start, "option": phi}, {"option": gptq}, {"option": llama}],
        # the visitor typed the length and the method: nothing is changed for them
        [{"set": start, "own": ["max_seq_length", "method"], "option": phi}, {"option": gptq}],
        # changed for phi-2, then typed over by the visitor: not put back
        [{"set": start, "option": phi}, {"set": {"max_seq_length": "1024"}, "own": ["max_seq_length"]},
         {"option": llama}],
        # a link's own length is kept (the engine's refusal says why)
        [{"set": {"max_seq_length": "8192", "method": "qlora"}, "option": phi, "keep": ["max_seq_length"]}],
    ])
    # by hand from the models' limits: phi-2 max_position_embeddings 2048; the GPTQ checkpoint trains with lora
    assert got[0] == [{"length": "2048", "method": "qlora", "notes": ["adapt_length"]},
                      {"length": "4096", "method": "lora", "notes": ["adapt_back", "adapt_method"]},
                      {"length": "4096", "method": "qlora", "notes": ["adapt_back"]}]
    assert got[1] == [{"length": "4096", "method": "qlora", "notes": []},
                      {"length": "4096", "method": "qlora", "notes": []}]
    assert got[2] == [{"length": "2048", "method": "qlora", "notes": ["adapt_length"]},
                      {"length": "1024", "method": "qlora", "notes": []}]
    assert got[3] == [{"length": "8192", "method": "qlora", "notes": []}]

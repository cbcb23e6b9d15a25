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

// The form follows the model picked: a value the model cannot take (a length over its context, a method its
// pre-quantized checkpoint does not train with) becomes one it takes, as its catalog option says
// (data-max-seq / data-method: sizing.web.model_limits, the engine's own limits). A field the visitor typed,
// or the link opened gave, is left as it is: the engine's refusal then says why. prerender.form_state
// applies the same rule to a link at build time (tests/pyodide/test_prerender.py holds the two together).

/** adapt(keep): apply the picked model's limits except to the fields in `keep` (a link's), returning the notes
 * to show; own(name): a field the visitor set, never adapted from then on. */
export function makeAdapter(form) {
  const owned = new Set();
  const auto = new Map(); // field -> {was, now}: a value adapt() set, put back once another model allows it
  const field = (name) => form.querySelector(`[name="${name}"]`);

  function own(name) {
    owned.add(name);
    auto.delete(name);
  }

  function adapt(keep = new Set()) {
    const free = (name) => !owned.has(name) && !keep.has(name);
    const select = field("model");
    const option = select && select.selectedOptions[0];
    const length = field("max_seq_length");
    const method = field("method");
    const notes = [];
    const max = option && option.dataset.maxSeq ? Number(option.dataset.maxSeq) : Infinity;
    const fixed = option && option.dataset.method ? option.dataset.method : null;
    // What an earlier model made us change, and nobody touched since, goes back first.
    for (const [name, change] of Array.from(auto)) {
      const el = field(name);
      if (!el || el.value !== change.now) {
        auto.delete(name);
        continue;
      }
      const allowed = name === "max_seq_length" ? Number(change.was) <= max : fixed === null || fixed === change.was;
      if (allowed) {
        el.value = change.was;
        auto.delete(name);
        notes.push({ key: "adapt_back", params: { field: name, value: change.was } });
      }
    }
    if (length && free("max_seq_length") && Number(length.value) > max) {
      const was = auto.has("max_seq_length") ? auto.get("max_seq_length").was : length.value;
      length.value = String(max);
      auto.set("max_seq_length", { was, now: length.value });
      notes.push({ key: "adapt_length", params: { value: max } });
    }
    if (method && fixed !== null && free("method") && method.value !== fixed
        && Array.from(method.options).some((o) => o.value === fixed)) {
      const was = auto.has("method") ? auto.get("method").was : method.value;
      method.value = fixed;
      auto.set("method", { was, now: fixed });
      notes.push({ key: "adapt_method", params: { value: fixed, was } });
    }
    return notes;
  }

  return { adapt, own };
}

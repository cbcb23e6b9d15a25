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
    const option = field("model") && field("model").selectedOptions[0];
    const max = option && option.dataset.maxSeq ? Number(option.dataset.maxSeq) : Infinity;
    const fixed = option && option.dataset.method ? option.dataset.method : null;
    const notes = [];
    // Each field from the value it had before adapt() changed it (unless touched since), to this model's.
    function follow(name, target, key) {
      const el = field(name);
      if (!el) return;
      const change = auto.get(name);
      const base = change && el.value === change.now ? change.was : el.value;
      auto.delete(name);
      if (owned.has(name) || keep.has(name)) return;
      const value = target(base);
      if (value === base) {
        if (el.value !== base) notes.push({ key: "adapt_back", params: { field: name, value: base } });
      } else {
        auto.set(name, { was: base, now: value });
        notes.push({ key, params: { field: name, value, was: base } });
      }
      el.value = value;
    }
    follow("max_seq_length", (v) => (Number(v) > max ? String(max) : v), "adapt_length");
    const methods = field("method") ? Array.from(field("method").options || [], (o) => o.value) : [];
    follow("method", (v) => (fixed !== null && methods.includes(fixed) ? fixed : v), "adapt_method");
    return notes;
  }

  return { adapt, own };
}

// A pasted config.json read without trusting it: its nesting depth is checked before JSON.parse (the
// page's JSON.stringify and the worker's json.loads both recurse, 5,000 brackets overflow the stack),
// and a syntax error becomes a code with a line and column instead of the browser's English message.
export const MAX_DEPTH = 64; // a model's config.json nests 3-4 levels (rope_scaling, quantization_config)

/** The deepest nesting of [ and { outside strings, read without recursion. */
export function nesting(text) {
  let depth = 0;
  let max = 0;
  let inString = false;
  let escaped = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (escaped) escaped = false;
      else if (c === 92) escaped = true; // backslash
      else if (c === 34) inString = false; // quote
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) max = Math.max(max, ++depth);
    else if (c === 93 || c === 125) depth -= 1;
  }
  return max;
}

/** {value} of JSON text, or {error: {code, params}}: json_too_deep {max} or json_syntax {line, column}. */
export function parseJSON(text) {
  if (nesting(text) > MAX_DEPTH) return { error: { code: "json_too_deep", params: { max: MAX_DEPTH } } };
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    // V8 names the offset ("... at position 7"); at the end of the text it says "Unexpected end".
    const m = /position (\d+)/.exec(String((err && err.message) || ""));
    const lines = text.slice(0, m ? Number(m[1]) : text.length).split("\n");
    return { error: { code: "json_syntax", params: { line: lines.length, column: lines[lines.length - 1].length + 1 } } };
  }
}

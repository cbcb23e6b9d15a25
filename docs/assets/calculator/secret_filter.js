// Secrets kept out of the rental request (request.js): service key formats, credentials in connection
// strings, passwords written in Russian, Uzbek or English, and random-looking values after a key-like word.
// One implementation, tested in Node by tests/browser/test_secret_filter.py.

// Key formats with a fixed shape, from each service's documented or observed prefix.
const FORMATS = [
  ["aws_key_id", /(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)[A-Z0-9]{16}(?![A-Z0-9])/],
  ["gcp_api_key", /AIza[0-9A-Za-z_-]{35}/],
  ["gcp_oauth", /ya29\.[0-9A-Za-z_-]{20,}/],
  ["gcp_client_secret", /GOCSPX-[0-9A-Za-z_-]{20,}/],
  ["gcp_service_account", /"(?:private_key|private_key_id)"\s*:|"type"\s*:\s*"service_account"/],
  ["azure_account_key", /(?:AccountKey|SharedAccessKey|SharedSecret)\s*=\s*[A-Za-z0-9+/=]{16,}/i],
  ["azure_sas", /[?&;]sig=[A-Za-z0-9%+/=]{20,}/],
  ["azure_client_secret", /(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}/],
  ["github_token", /(?<![A-Za-z0-9])(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}/],
  ["github_pat", /github_pat_[A-Za-z0-9_]{30,}/],
  ["gitlab_token", /(?<![A-Za-z0-9])gl(?:pat|dt|rt|cbt|ptt|ft|imt|oas|soat|wt|ffct|agent)-[A-Za-z0-9_-]{20,}/],
  ["gitlab_runner", /GR1348941[A-Za-z0-9_-]{20,}/],
  ["huggingface", /(?<![A-Za-z0-9])(?:hf_|api_org_)[A-Za-z0-9]{30,}/],
  ["wandb_v1", /wandb_v1_[A-Za-z0-9_]{30,}/],
  // legacy W&B keys are 40 hex digits, like a commit hash: a secret only next to W&B's name
  ["wandb_hex", /(?:wandb|w&b|weights\s*(?:&|and)\s*biases)[^\n]{0,40}?(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])/i],
  ["sk_key", /(?<![A-Za-z0-9])sk-(?:ant-|proj-|svcacct-|admin-|or-)?[A-Za-z0-9_-]{20,}/],
  ["stripe", /(?<![A-Za-z0-9])[rs]k_(?:live|test)_[A-Za-z0-9]{16,}/],
  ["slack_token", /xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,}/],
  ["slack_webhook", /hooks\.slack\.com\/services\/T[A-Z0-9]+\/B[A-Z0-9]+\/[A-Za-z0-9]+/],
  ["private_key", /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d|AGE-SECRET-KEY-1[0-9A-Z]{20,}/],
  ["jwt", /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./],
  // scheme://user:password@host (the user may be empty: redis://:password@host)
  ["url_credentials", /[a-z][a-z0-9+.-]{1,20}:\/\/[^\s:/@]*:[^\s/@]+@[^\s/@]/i],
  ["npm", /(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}/],
  ["pypi", /pypi-AgE[A-Za-z0-9_-]{50,}/],
  ["docker_hub", /dckr_pat_[A-Za-z0-9_-]{20,}/],
  ["digitalocean", /do[pro]_v1_[a-f0-9]{64}/],
  ["replicate_groq_xai", /(?<![A-Za-z0-9])(?:r8_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{40,})/],
  ["sendgrid", /SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/],
  ["telegram_bot", /(?<!\d)\d{8,10}:AA[A-Za-z0-9_-]{33}/],
  ["bearer", /\bbearer\s+[A-Za-z0-9._~+/-]{16,}/i],
  ["sshpass", /\bsshpass\s+-p\s*\S+/],
  ["authorization_header", /authorization\s*:\s*(?:basic|bearer|token|digest)\s+\S{8,}/i],
];

// Words that announce a secret, in the page's three languages (a letter or digit may not touch them).
const PASSWORD = String.raw`passwords?|passwd|pwd|passphrase|passcode|парол\p{L}*|пасворд|parol\p{L}*|maxfiy\s+so[‘'ʻ’\x60]?z\p{L}*`;
const KEY = String.raw`secrets?|tokens?|api[\s_-]?keys?|apikey|access[\s_-]?keys?|private[\s_-]?keys?|client[\s_-]?secret|credentials?|keys?|токен\p{L}*|ключ(?:а|ом|и|у|ей|ами|ах)?|секрет\p{L}*|kalit\p{L}*|token\p{L}*`;
const EDGE_L = String.raw`(?<![\p{L}\p{N}])`;
const EDGE_R = String.raw`(?![\p{L}\p{N}])`;
const WORD = new RegExp(`${EDGE_L}(?:(${PASSWORD})|${KEY})${EDGE_R}`, "giu");
// keyword[_suffix]["]: value  or  keyword = value (HF_TOKEN=…, "api_key": "…", пароль: …)
const ASSIGNED = /^(?:[_-][\p{L}\p{N}_-]{0,30})?["']?\s*[:=]\s*["'«]?([^\s"'»,;]+)/u;
const COPULA = new Set(["is", "was", "are", "=", "—", "–", "-", "это", "будет", "был", "такой", "bu", "esa", "—"]);
// after a keyword these are words of an ordinary sentence, not a value
const NOT_A_VALUE = new Set(["none", "no", "not", "n/a", "na", "null", "never", "required", "needed", "empty", "unknown",
  "нет", "не", "нужен", "нужно", "не нужен", "yo‘q", "yoq", "yo'q", "emas", "kerak", "kerakmas", "-", "—"]);
const NUMBER = /^[~≈]?\d[\d\s.,_]*(?:[kmgtb]|k?ib|[kmg]b|млн|млрд|тыс|mln|mlrd|ming)?$/iu;

function entropy(text) {
  const counts = new Map();
  for (const ch of text) counts.set(ch, (counts.get(ch) || 0) + 1);
  let bits = 0;
  for (const n of counts.values()) bits -= (n / text.length) * Math.log2(n / text.length);
  return bits;
}

const strip = (token) => token.replace(/^[\s"'«“(<\[{]+|[\s"'»”)>\]}.,;:!?]+$/gu, "");

// A password a person picked: six or more characters mixing at least `kinds` of lower, upper, digit, symbol.
function passwordLike(token, kinds = 2) {
  if (token.length < 6 || NUMBER.test(token)) return false;
  const classes = [/\p{Ll}/u, /\p{Lu}/u, /\p{N}/u, /[^\p{L}\p{N}]/u].filter((re) => re.test(token)).length;
  return classes >= kinds && (kinds === 2 || /\p{Ll}/u.test(token));
}

// A generated key: long, drawn from a key alphabet, letters with digits (or mixed case), high entropy,
// and one long run between separators (a model id or a bucket name is short words joined by - _ . /).
function randomLooking(token, min = 16) {
  if (token.length < min || !/^[A-Za-z0-9+/=_.~-]+$/.test(token)) return false;
  const letters = /[A-Za-z]/.test(token);
  const digits = /\d/.test(token);
  const mixed = /[a-z]/.test(token) && /[A-Z]/.test(token);
  if (!letters || !(digits || mixed)) return false;
  const run = Math.max(...token.split(/[-_./]/).map((s) => s.length));
  return run >= Math.min(12, min) && entropy(token) >= 3.2;
}

/** The first rule a text breaks ({rule, match}), or null: what request.js refuses to put in a request. */
export function findSecret(raw) {
  // Zero-width characters and full-width forms would hide a key from the patterns.
  const text = String(raw || "").normalize("NFKC").replace(/[\u200b-\u200d\u2060\ufeff\u00ad]/g, "");
  for (const [rule, re] of FORMATS) {
    const m = re.exec(text);
    if (m) return { rule, match: m[0] };
  }
  for (const m of text.matchAll(WORD)) {
    const password = Boolean(m[1]);
    const after = text.slice(m.index + m[0].length);
    const assigned = ASSIGNED.exec(after);
    if (assigned) {
      const value = strip(assigned[1]);
      const plain = !value || NOT_A_VALUE.has(value.toLowerCase());
      // after a password word any value is one (a PIN too); after "key"/"token" a number is a count
      // ("tokens: 50M"), a path names a file (~/.ssh/id_ed25519.pub), a short plain word is prose
      const keyValue = !NUMBER.test(value) && !/^(?:~|\.{0,2}\/)/.test(value)
        && (passwordLike(value) || value.length >= 12);
      if (!plain && (password || keyValue)) return { rule: "assigned", match: m[0] };
    }
    const next = after.split(/\s+/u).filter(Boolean).slice(0, 4).map(strip).filter(Boolean);
    for (let i = 0; i < next.length; i++) {
      const token = next[i];
      if (randomLooking(token)) return { rule: "random_after_keyword", match: m[0] };
      // right after the word two kinds of character suffice; further on, three with a lower-case letter
      // (a GPU name such as H100-SXM is upper case and digits)
      if (password && passwordLike(token, i === 0 ? 2 : 3)) return { rule: "password", match: m[0] };
      // "my password is swordfish", "пароль — qwerty", "parolim bu olma"
      if (password && i > 0 && COPULA.has(next[i - 1].toLowerCase()) && token.length >= 4
          && !NOT_A_VALUE.has(token.toLowerCase())) return { rule: "password", match: m[0] };
    }
  }
  // A long random token anywhere: not hex (a commit hash is ordinary), mixed case with digits.
  for (const token of text.split(/\s+/u).map(strip)) {
    if (token.length >= 32 && /[a-z]/.test(token) && /[A-Z]/.test(token) && /\d/.test(token)
        && randomLooking(token, 32) && entropy(token) >= 4.3) return { rule: "random", match: token };
  }
  return null;
}

/** True when the text holds something findSecret refuses. */
export function isSecret(text) {
  return findSecret(text) !== null;
}

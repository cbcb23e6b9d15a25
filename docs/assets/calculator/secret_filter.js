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
  ["telegram_bot", /(?<!\d)\d{8,10}:AA[A-Za-z0-9_-]{30,36}(?![A-Za-z0-9_-])/],
  ["bearer", /\bbearer\s+[A-Za-z0-9._~+/-]{16,}/i],
  ["sshpass", /\bsshpass\s+-p\s*\S+/],
  // a password glued to -p on a database client's command line (mysql -u root -pS3cret)
  ["cli_password", /\b(?:mysql(?:dump|admin|import|sh)?|mariadb(?:-dump)?)\b[^\n]*?\s-p(?!\s)[^\s-]\S*/],
  ["authorization_header", /authorization\s*:\s*(?:basic|bearer|token|digest)\s+\S{8,}/i],
  // Russian and CIS clouds: Yandex Cloud IAM token, API key, static access key, OAuth token
  ["yandex_cloud", /(?<![A-Za-z0-9])(?:t1\.[A-Za-z0-9_-]{20,}={0,2}\.[A-Za-z0-9_-]{40,}|AQVN[A-Za-z0-9_-]{35,}|YCAJ[A-Za-z0-9_-]{20,}|YC[A-Za-z0-9_-]{38}(?![A-Za-z0-9_-])|y[0-3]_[A-Za-z0-9_-]{50,})/],
  ["alibaba_tencent", /(?<![A-Za-z0-9])(?:LTAI[A-Za-z0-9]{12,24}|AKID[A-Za-z0-9]{13,40})(?![A-Za-z0-9])/],
  ["databricks", /(?<![A-Za-z0-9])dapi[a-f0-9]{32}/],
  ["atlassian_bitbucket", /(?<![A-Za-z0-9])(?:ATATT3|ATBB|ATCTT3)[A-Za-z0-9_=.-]{24,}/],
  ["google_refresh", /(?<![A-Za-z0-9])1\/\/0[A-Za-z0-9_-]{30,}/],
  ["mailgun_twilio", /(?<![A-Za-z0-9-])(?:key-[0-9a-f]{32}|SK[0-9a-f]{32})(?![A-Za-z0-9])/],
  ["discord", /discord(?:app)?\.com\/api\/webhooks\/\d+\/[A-Za-z0-9_-]{20,}|(?<![A-Za-z0-9])[MN][A-Za-z0-9]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}/],
  // AI and ML services with a fixed prefix: Perplexity, Fireworks, Cerebras, Tavily, Together, RunPod, Modal,
  // Pinecone, Linear, Notion, Postman, Supabase, Shopify, W&B local servers
  ["ai_services", /(?<![A-Za-z0-9])(?:pplx-[A-Za-z0-9]{32,}|fw_[A-Za-z0-9]{20,}|csk-[a-z0-9]{32,}|tvly-[A-Za-z0-9-]{20,}|tgp_v1_[A-Za-z0-9_-]{20,}|rpa_[A-Za-z0-9]{20,}|a[ks]-[A-Za-z0-9]{22,}|pcsk_[A-Za-z0-9_]{30,}|lin_api_[A-Za-z0-9]{30,}|ntn_[A-Za-z0-9]{30,}|PMAK-[a-f0-9]{24}-[a-f0-9]{30,}|sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}|local-[a-f0-9]{40})(?![A-Za-z0-9])/],
  // infrastructure and observability services: HashiCorp Vault and Terraform Cloud, Grafana, New Relic, Sentry,
  // Dynatrace, LangSmith, Doppler, Heroku, Netlify, Render, Fly.io, Figma, Square, Dropbox
  ["infra_services", /(?<![A-Za-z0-9])(?:hv[sbr]\.[A-Za-z0-9_-]{24,}|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_-]{40,}|gl(?:c|sa)_[A-Za-z0-9_]{32,}|NRAK-[A-Z0-9]{27}|sntry[su]_[A-Za-z0-9_=+/-]{30,}|dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}|dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,30}\.)?[A-Za-z0-9]{40,}|HRKU-[A-Za-z0-9_-]{30,}|nfp_[A-Za-z0-9]{36}|rnd_[A-Za-z0-9]{30,}|fm[12]_[A-Za-z0-9+/=_-]{40,}|figd_[A-Za-z0-9_-]{40}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}|sl\.[A-Za-z0-9_-]{100,})/],
  // a JSON object in base64 ('{"' encodes as eyJ), one long blob: API tokens of Neptune and others
  ["base64_json", /(?<![A-Za-z0-9+/])eyJ[A-Za-z0-9+/_-]{40,}={0,2}/],
];

// Words that announce a secret, in the page's three languages (a letter or digit may not touch them).
const APOSTROPHE = "[‘'ʻ’\\x60]?";
const PASSWORD = String.raw`passwords?|passwd|pwd|passphrase|passcode|access\s+code|парол\p{L}*|пасворд|код\p{L}*\s+доступа|пин[\s-]?код\p{L}*|parol\p{L}*|maxfiy\s+so${APOSTROPHE}z\p{L}*|maxfiy\s+kod\p{L}*|kirish\s+(?:so${APOSTROPHE}z|kod)\p{L}*|pin[\s-]?(?:code|kod\p{L}*|код\p{L}*)`;
// Short words that are also ordinary ones (a single pass, pin_memory): a secret only when a value is written
// right after them with ":" or "=", or a password-looking value follows.
const WEAK = String.raw`pass|pw|pin|пин`;
// "token" but not tokenizer / tokenization / токенизатор (a config.json names its tokenizer_class)
// Words after which a value is a secret by what they name (a client secret, credentials): letters with digits
// there are one even when they read as a name (secret: hunter2), as after a password word.
const SECRET_WORD = String.raw`secrets?|client[\s_-]?secrets?|credentials?|секрет\p{L}*|maxfiy`;
const KEY = String.raw`tokens?(?!i[zsз])|api[\s_-]?keys?|apikey|access[\s_-]?keys?|private[\s_-]?keys?|keys?|auth|токен(?!из)\p{L}*|ключ(?:а|ом|и|у|ей|ами|ах)?|kalit\p{L}*|token(?!i[zs])\p{L}*`;
const EDGE_L = String.raw`(?<![\p{L}\p{N}])`;
const EDGE_R = String.raw`(?![\p{L}\p{N}])`;
const WORD = new RegExp(`${EDGE_L}(?:(${PASSWORD})|(${WEAK})|(${SECRET_WORD})|(?:${KEY}))${EDGE_R}`, "giu");
// NAME=value with a secret in an upper-case variable name (PGPASSWORD, MLFLOW_TRACKING_PASSWORD, HF_TOKEN)
const ENV = /(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]*?(PASSWORD|PASSWD|PWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH)[A-Z0-9_]*\s*[:=]\s*["']?([^\s"',;]+)/g;
// user:password@host without a scheme (root:hunter2@10.0.0.5); the user is not a label such as "email:"
const USERINFO = /(?<![\w.%+/-])([\w.+-]{1,64}):([^\s:/@]{3,128})@(?!sha\d)[A-Za-z0-9][A-Za-z0-9.-]*/g;
const LABELS = new Set(["email", "e-mail", "mail", "contact", "contacts", "почта", "pochta", "kontakt", "telegram", "tg"]);
// keyword[_suffix]["]: value  or  keyword = value (HF_TOKEN=…, "api_key": "…", пароль: …)
const ASSIGNED = /^(?:[_-][\p{L}\p{N}_-]{0,30})?["']?\s*[:=]\s*["'«]?([^\s"'»,;]+)/u;
const COPULA = new Set(["is", "was", "are", "=", "—", "–", "-", "это", "будет", "был", "такой", "bu", "esa", "—"]);
// after a keyword these are words of an ordinary sentence, not a value
const NOT_A_VALUE = new Set(["none", "no", "not", "n/a", "na", "null", "never", "required", "needed", "empty", "unknown",
  "нет", "не", "нужен", "нужно", "не нужен", "yo‘q", "yoq", "yo'q", "emas", "kerak", "kerakmas", "-", "—",
  "true", "false", "yes", "on", "off"]);
// A placeholder or a reference, not a value: <your token>, ***, xxxx, $HF_TOKEN, ${SECRET}, %TOKEN%, your_key_here, ...
const PLACEHOLDER = /^(?:<.*>?|\*+|[xX]{3,}|\.{3}|…|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[A-Za-z_][A-Za-z0-9_]*%|(?:your|my|ваш|sizning)[\p{L}_-]*)$/u;
const NUMBER = /^[~≈]?\d[\d\s.,_]*(?:[kmgtb]|k?ib|[kmg]b|млн|млрд|тыс|mln|mlrd|ming)?$/iu;

function entropy(text) {
  const counts = new Map();
  for (const ch of text) counts.set(ch, (counts.get(ch) || 0) + 1);
  let bits = 0;
  for (const n of counts.values()) bits -= (n / text.length) * Math.log2(n / text.length);
  return bits;
}

const strip = (token) => token.replace(/^[\s"'«“(<\[{\x60]+|[\s"'»”)>\]}.,;:!?\x60]+$/gu, "");

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
  // the longest run between separators is itself key-like: digits or mixed case (a path of words such as
  // src/aiconfigurator_core/model_configs is not)
  const run = token.split(/[-_./]/).reduce((a, b) => (b.length > a.length ? b : a), "");
  const keyRun = /\d/.test(run) || (/[a-z]/.test(run) && /[A-Z]/.test(run));
  return run.length >= Math.min(12, min) && keyRun && entropy(token) >= 3.2;
}

// 16 or more hex digits with letters and digits both: a key's body (a commit hash too, but after "key:" it is a key)
const HEX_KEY = /^(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{16,}$/i;
// a label of up to three words after a password word, then ":" or "=" and the value
const LABELLED = /^(?:\s+[\p{L}\p{N}_-]+){1,3}\s*[:=]\s*["'«]?([^\s"'»,;]+)/u;
// words joined by _ . - (num_key_value_heads, eu-west-1, lora_A): a name, not a generated key
const IDENTIFIER = /^_*[A-Za-z][a-z0-9]*(?:[_.-][A-Za-z0-9][a-z0-9]*)*$/;
// A run of a random key changes between lower case, upper case and digits often; words (HuggingFaceTB, SmolLM2) rarely.
function scrambled(run) {
  const kind = (ch) => (/[a-z]/.test(ch) ? 0 : /[A-Z]/.test(ch) ? 1 : /\d/.test(ch) ? 2 : 3);
  let changes = 0;
  for (let i = 1; i < run.length; i++) if (kind(run[i]) !== kind(run[i - 1])) changes++;
  return changes >= 0.4 * (run.length - 1);
}

// "password policy is strict", "password reset is done by IT": the sentence is about the password, no value follows
const TOPIC = /^(?:polic(?:y|ies)|reset|rotation|requirements?|manager|length|changes?|expiry|expiration|strength|complexity|политика|сброс|смена|требования|длина|менеджер|siyosati|talablari|uzunligi)$/iu;
// "login admin pass admin123", "user: admin, pass: admin": a login word, its value, then a password word and its value
const LOGIN = /(?<![\p{L}\p{N}])(?:login|user(?:name)?|логин|пользователь|foydalanuvchi)(?![\p{L}\p{N}])\s*[:=]?\s*([^\s,;:=]+)[\s,;]+(pass(?:word)?|pwd|пароль|parol)(?![\p{L}\p{N}-])\s*([:=]?)\s*(\S+)/iu;
// root:toor, root/Passw0rd!, ubuntu / Qwerty123!: an administrator account, then its password (a path or a file
// after "root/" is not one: root/lib/python3.11, admin/readme.md)
const ACCOUNT = /(?<![\p{L}\p{N}/._-])(?:root|admin(?:istrator)?|ubuntu|ec2-user|postgres|sa|pi)(?:(:)(?!\/)|\s*\/\s*)([^\s,;]+)/giu;
// an account or a way in named right after "пароль" ("пароль root": root's password), not the value itself
const ACCOUNT_WORDS = /^(?:root|sudo|admin|ssh|vpn|wifi|jupyter|ubuntu)$/iu;
// words that make a sentence (prepositions, auxiliaries, "see", "later"), not a passphrase
const GRAMMAR = new Set(["in", "via", "by", "to", "from", "on", "at", "with", "will", "be", "is", "see", "ask", "later",
  "separately", "в", "во", "на", "по", "через", "из", "у", "от", "отдельно", "позже", "смотрите", "см", "спросите",
  "orqali", "da", "dan", "ga", "keyin", "keyinroq", "alohida", "qarang"]);
// a value written in quotes right after a password word ("password 'letmein'"): a literal
const QUOTED = /^\s*(?:'([^'\s]{3,})'|"([^"\s]{3,})"|\x60([^\x60\s]{3,})\x60|«([^»\s]{3,})»)/u;
// a test's outcome after "pass:" (a rate, a verdict), not a password
const VERDICT = /^(?:[~≈]?\d+(?:[.,]\d+)?\s*%|ok|okay|passed|failed|fail|success|done|all)$/iu;
const placeholder = (value) => PLACEHOLDER.test(value) || NOT_A_VALUE.has(value.toLowerCase());

// A value written after "key" / "token" with ":" or "=" that is a key: a number is a count ("tokens: 50M") unless it
// is as long as a numeric key, a path names a file (~/.ssh/id_ed25519.pub), words are prose or a name
// (num_key_value_heads, "использовать SSH"), unless they are a generated key's run (hex or random: a Kaggle key).
function keyValue(value) {
  if (/^\d{16,}$/.test(value)) return true;
  if (NUMBER.test(value) || /^(?:~|\.{0,2}\/)/.test(value) || /^\p{L}+$/u.test(value)) return false;
  if (IDENTIFIER.test(value)) return randomLooking(value) || HEX_KEY.test(value);
  // a short value needs three kinds of character with a lower-case letter (not a GPU name: 8xH100, A100-80GB)
  return value.length >= 12 || (value.length >= 8 && passwordLike(value, 3));
}

// An SSH public key is given to a provider on purpose (authorized_keys): its base64 body is no secret, though random.
const PUBLIC_KEY = /((?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp(?:256|384|521)|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com))\s+AAAA[A-Za-z0-9+/]{20,}={0,3}(?![A-Za-z0-9+/=])/g;

/** The first rule a text breaks ({rule, match}), or null: what request.js refuses to put in a request. */
export function findSecret(raw) {
  // Zero-width characters and full-width forms would hide a key from the patterns.
  const text = String(raw || "").normalize("NFKC").replace(/[\u200b-\u200d\u2060\ufeff\u00ad]/g, "")
    .replace(PUBLIC_KEY, "$1 <public key>");
  for (const [rule, re] of FORMATS) {
    const m = re.exec(text);
    if (m) return { rule, match: m[0] };
  }
  for (const m of text.matchAll(ENV)) {
    const value = strip(m[2]);
    const password = /PASS|PWD/.test(m[1]);
    if (!value || placeholder(value) || /^(?:~|\.{0,2}\/)/.test(value)) continue;
    if (password ? value.length >= 4
      : !NUMBER.test(value) && !IDENTIFIER.test(value) && (passwordLike(value) || value.length >= 12)) {
      return { rule: "env", match: m[0].split(/[:=]/)[0].trim() };
    }
  }
  for (const m of text.matchAll(USERINFO)) {
    const value = m[2];
    if (!LABELS.has(m[1].toLowerCase()) && passwordLike(value) && /[^A-Za-z._-]/.test(value)) {
      return { rule: "url_credentials", match: `${m[1]}:…@` };
    }
  }
  const login = LOGIN.exec(text);
  if (login) {
    const value = strip(login[4]);
    const ends = /[.,;!?]$/u.test(login[4]) || /^\s*(?:$|[\n.,;!?])/u.test(text.slice(login.index + login[0].length));
    // a plain word ending the clause is the value after ":" or "=", or the login's own word again (admin / admin),
    // or a Latin word after a Cyrillic pair ("логин admin пароль admin"); not "user root, password provided."
    const plain = ends && (Boolean(login[3]) || value === strip(login[1])
      || (/\p{Script=Cyrillic}/u.test(login[0]) && /^[A-Za-z0-9]+$/.test(value)));
    if (value.length >= 3 && !placeholder(value) && (plain || passwordLike(value) || /^\d{4,}$/.test(value))) {
      return { rule: "password", match: login[0].split(/\s/u)[0] };
    }
  }
  for (const m of text.matchAll(ACCOUNT)) {
    const value = strip(m[2]);
    if (!value || placeholder(value) || value.includes("/") || NUMBER.test(value)) continue;
    // postgres, ubuntu and pi are also image names (postgres:16-alpine, ubuntu:jammy): there a password needs an
    // upper-case letter or a symbol no version tag has
    const image = /^(?:ubuntu|postgres|pi|ec2-user)/iu.test(m[0]);
    const strong = /[A-Z]|[^A-Za-z0-9._-]/.test(value);
    // a plain lower-case word after "admin:" is a password where the clause ends with it (root:toor), not a mode
    // (admin:read access)
    const ends = /^\s*(?:$|[\n.,;!?@])/u.test(text.slice(m.index + m[0].length)) || /[.,;!?]$/u.test(m[2]);
    // "admin / admin", "root/root.": the default pair, the account's name as its password, where the clause ends
    const same = ends && value.toLowerCase() === m[0].split(/[:/\s]/u)[0].toLowerCase();
    if (m[1] ? value.length >= 4 && (image ? strong : strong || /\d/.test(value) || ends)
      : same || passwordLike(value, 3) && strong) {
      return { rule: "password", match: m[0].split(/[:/\s]/u)[0] };
    }
  }
  for (const m of text.matchAll(WORD)) {
    const after = text.slice(m.index + m[0].length);
    if (m[2]) {  // pass / pw / PIN: only "word: value" or a value that looks like a picked password
      const pin = /^п?[иi]н$|^pin$/iu.test(m[2]);
      const direct = /^\s*[:=]\s*["'«]?([^\s"'»,;]+)/u.exec(after);
      const words = after.split(/\s+/u).filter(Boolean).slice(0, 2).map(strip);
      // "my pass is Tr0ub4dor&3": a copula then the value counts as written with ":" ("pass rate is 95 %" does not)
      const stated = !direct && words.length === 2 && COPULA.has(words[0].toLowerCase());
      const value = direct ? strip(direct[1]) : stated ? words[1] : words[0] || "";
      if (!value || placeholder(value)) continue;
      if (pin ? /^\d{4,8}$/.test(value) : direct || stated ? passwordLike(value) || /^\d{4,}$/.test(value)
        : passwordLike(value, 3)) return { rule: "password", match: m[0] };
      // "pass: abc", "user: root, pw: toor": the word opens its clause (after the start, a line break, "," or ";")
      // and the value closes it: a label and its value ("we pass: yes" is a sentence; "Pass: the results to the
      // team" goes on)
      const opens = /(?:^|[\n,;(])\s*$/u.test(text.slice(0, m.index));
      const closes = direct && /^\s*(?:$|[\n.,;!?)])/u.test(after.slice(direct[0].length));
      if (!pin && opens && closes && value.length >= 3 && !NUMBER.test(value) && !VERDICT.test(value)) {
        return { rule: "password", match: m[0] };
      }
      continue;
    }
    const password = Boolean(m[1]);
    const assigned = ASSIGNED.exec(after);
    if (assigned) {
      const value = strip(assigned[1]);
      // "Пароль: смотрите в Bitwarden": a plain word with the sentence going on is prose, not the value
      // ("correct horse battery staple" has no word of a sentence's grammar: a passphrase)
      const clause = after.slice(after.indexOf(assigned[1])).split(/[.,;!?\n]/u)[0].split(/\s+/u).slice(0, 5);
      const prose = password && /^\p{L}+$/u.test(value) && !passwordLike(value)
        && (GRAMMAR.has(value.toLowerCase()) || (clause.length >= 3 && clause.some((w) => GRAMMAR.has(w.toLowerCase()))));
      const plain = !value || placeholder(value) || prose;
      if (!plain && (password || keyValue(value) || (m[3] && passwordLike(value) && /\d/.test(value)))) {
        return { rule: "assigned", match: m[0] };
      }
    }
    // a compound (password-less, --password-stdin) names no value
    if (/^-\p{L}/u.test(after)) continue;
    const quoted = password && QUOTED.exec(after);
    if (quoted) {  // "password 'letmein'": a literal in quotes right after the word
      const value = quoted.slice(1).find(Boolean) || "";
      if (!placeholder(value)) return { rule: "password", match: m[0] };
    }
    if (password) {
      // "password for the portal: Olma2024", "parolni yuboraman: 7788aa": a label of up to three words, then the value
      const labelled = LABELLED.exec(after);
      // not a label about the password ("password manager: Bitwarden", "password policy: strong")
      if (labelled && !labelled[0].split(/[\s:=]+/u).some((w) => TOPIC.test(w))) {
        const value = strip(labelled[1]);
        // a plain word there is the value where the clause ends with it ("Пароль для входа: olma")
        const ends = /[.,;!?]$/u.test(labelled[1]) || /^\s*(?:$|[\n.,;!?])/u.test(after.slice(labelled[0].length));
        const access = /ключ|key|kalit|sso|ssh/iu.test(value);  // "Пароль для входа: SSH-ключ" names another way in
        if (!placeholder(value) && !access && (passwordLike(value) || /^\d{4,}$/.test(value) || (ends && value.length >= 3))) {
          return { rule: "password", match: m[0] };
        }
      }
    }
    // a password word looks further for "... is <value>" (password for the server is Summer2024!)
    const words = after.split(/\s+/u).filter(Boolean);
    const reach = password ? 8 : 4;
    const taken = words.slice(0, reach).filter((w) => strip(w));  // as written, punctuation kept
    const next = taken.map(strip);
    // a plain word after "is" is the value only where the clause ends with it ("my password is swordfish", not
    // "the password is typed at the prompt")
    const last = (i) => /[.,;:!?)\]»”]$/u.test(taken[i]) || (i === taken.length - 1 && words.length <= reach);
    for (let i = 0; i < next.length; i++) {
      const token = next[i];
      if (i >= 4) {  // far from the word: a copula, then a value a person picked (not "is shared via Vault")
        if (COPULA.has(next[i - 1].toLowerCase()) && (passwordLike(token) || /^\d{4,}$/.test(token))) {
          return { rule: "password", match: m[0] };
        }
        continue;
      }
      if (randomLooking(token)) return { rule: "random_after_keyword", match: m[0] };
      // right after the word two kinds of character suffice; further on, three with a lower-case letter and a
      // digit (a GPU name such as H100-SXM is upper case and digits; SSH-ключу is a word)
      if (password && passwordLike(token, i === 0 ? 2 : 3) && (i === 0 || /\d/.test(token))) {
        return { rule: "password", match: m[0] };
      }
      // a PIN or an all-digit password right after the word: "password 123456", "пароль 4821", or two words on
      // where the clause ends with it ("пин-код карты 1234")
      if (password && /^\d{4,}$/.test(token) && (i === 0 || (i <= 2 && last(i)))) return { rule: "password", match: m[0] };
      // a Latin word right after a Cyrillic password word, the clause ending with it: "пароль qwerty" (not an
      // account or a protocol named after the word: "пароль root", "пароль SSH")
      if (password && i === 0 && /\p{Script=Cyrillic}/u.test(m[1]) && /^[A-Za-z][A-Za-z0-9]{3,}$/.test(token)
          && !/^[A-Z0-9]+$/.test(token) && !ACCOUNT_WORDS.test(token) && last(0)) {
        return { rule: "password", match: m[0] };
      }
      // "my password is swordfish", "пароль — qwerty", "parolim bu olma"
      if (password && i > 0 && COPULA.has(next[i - 1].toLowerCase()) && token.length >= 4
          && !NOT_A_VALUE.has(token.toLowerCase()) && !next.slice(0, i).some((w) => TOPIC.test(w))
          && (last(i) || passwordLike(token))) {
        return { rule: "password", match: m[0] };
      }
    }
  }
  // A long random token anywhere: not hex (a commit hash is ordinary), mixed case with digits.
  for (const token of text.split(/\s+/u).map(strip)) {
    if (token.length < 32 || !/[a-z]/.test(token) || !/[A-Z]/.test(token) || !/\d/.test(token)) continue;
    const run = token.split(/[-_./]/).reduce((a, b) => (b.length > a.length ? b : a), "");
    // base64 (a bare AWS secret key) has no - _ . at all; a model id or a file name has words between them
    if ((/^[A-Za-z0-9+/=]+$/.test(token) || run.length >= 24 || (run.length >= 16 && scrambled(run)))
        && randomLooking(token, 32) && entropy(token) >= 4.3) return { rule: "random", match: token };
  }
  return null;
}

/** True when the text holds something findSecret refuses. */
export function isSecret(text) {
  return findSecret(text) !== null;
}

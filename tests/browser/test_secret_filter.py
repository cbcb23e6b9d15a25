"""The rental request's secret filter (docs/assets/calculator/secret_filter.js) run in Node: the key formats
of common services, credentials in connection strings, passwords in Russian, Uzbek and English and random
values after a key-like word are refused; ordinary notes pass."""

from __future__ import annotations

import json
import random
import shutil
import string
import subprocess
from pathlib import Path

import pytest

from tests.needs import cannot_run

ROOT = Path(__file__).resolve().parents[2]
FILTER = ROOT / "docs" / "assets" / "calculator" / "secret_filter.js"
RUNNER = """
import("node:fs").then(async (fs) => {
  const { findSecret } = await import(process.argv[1]);
  const texts = JSON.parse(fs.readFileSync(0, "utf8"));
  process.stdout.write(JSON.stringify(texts.map((t) => findSecret(t))));
});
"""

_rng = random.Random(15)


def body(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """A random key body: built here so that no key-shaped literal sits in the repository."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"

SECRETS = {
    # passwords in the three languages, with and without ":" / "="
    "ru_colon": "пароль: Tr0ub4dor",
    "ru_pin": "Пароль: 4821",
    "ru_no_colon": "мой пароль qwerty123",
    "ru_dash": "пароль от сервера — korova",
    "ru_from_server": "пароль от сервера Qwerty!23",
    "uz_colon": "parol: olma2024",
    "uz_possessive": "mening parolim bu anor",
    "uz_secret_word": "maxfiy so‘z: Samarqand99",
    "en_is": "my password is swordfish",
    "en_is_digits": "The password is hunter2, please change it",
    "en_equals": "PASSWORD=S3cure!pass",
    "en_pwd": "ssh root@10.0.0.5 pwd: letmein99",
    "en_passphrase": "passphrase correct-horse-battery-9",
    # service key formats
    "aws_key_id": "AKIA" + body(16, string.ascii_uppercase + string.digits),
    "aws_secret": "aws_secret_access_key = " + body(40, B64),
    "gcp_api_key": "maps key AIza" + body(35),
    "gcp_service_account": '{"type": "service_account", "project_id": "x"}',
    "gcp_oauth": "ya29." + body(60),
    "azure_storage": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + body(86, B64) + "==",
    "azure_sas": "https://acct.blob.core.windows.net/c?sv=2024-01-01&sig=" + body(44, B64),
    "azure_client_secret": "abc8Q~" + body(34),
    "github_classic": "ghp_" + body(36),
    "github_fine": "github_pat_" + body(22) + "_" + body(59),
    "gitlab": "glpat-" + body(20),
    "huggingface": "HF token hf_" + body(34, string.ascii_letters),
    "huggingface_bare": "hf_" + body(34, string.ascii_letters),
    "wandb_v1": "wandb_v1_" + body(77),
    "wandb_legacy": "wandb login " + body(40, HEX),
    "wandb_env": "WANDB_API_KEY=" + body(40, HEX),
    "openai": "sk-proj-" + body(48),
    "anthropic": "sk-ant-api03-" + body(90),
    "slack": "xoxb-" + body(12, string.digits) + "-" + body(24),
    "slack_webhook": "https://hooks.slack.com/services/T" + body(8, string.ascii_uppercase) + "/B"
                     + body(8, string.ascii_uppercase) + "/" + body(24),
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
    "rsa_key": "-----BEGIN RSA PRIVATE KEY-----",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + body(43),
    "postgres": "postgres://trainer:" + body(12) + "@db.internal:5432/runs",
    "mongodb": "mongodb+srv://admin:hunter2@cluster0.example.net",
    "redis_no_user": "redis://:s3cret@cache:6379",
    "npm": "npm_" + body(36),
    "bearer": "Authorization: Bearer " + body(40),
    # a random value after a key-like word, without ":" or "="
    "token_space": "my token " + body(32),
    "ru_token": "токен " + body(24),
    "ru_key": "ключ " + body(30, B64),
    "uz_key": "kalit " + body(28),
    "api_key_words": "the api key is " + body(20),
    # short password words and PINs, a value written right after the word, user:password@host without a scheme
    "en_pw": "pw: hunter22",
    "en_pass": "login root / pass: Qwerty123",
    "en_pass_no_colon": "login root pass Qwerty123",
    "en_pass_is": "my pass is Tr0ub4dor&3",
    "en_pass_is_digits": "the pass is hunter2",
    "en_pin": "PIN: 4821",
    "en_digits": "password 123456",
    "ru_digits": "пароль 123456",
    "uz_digits": "parol 123456",
    "ru_access_code": "код доступа: 834712",
    "ru_pin_code": "ПИН-код 4821",
    "uz_login_word": "kirish so‘zi: Tashkent2024",
    "uz_secret_code": "maxfiy kod 90817",
    "userinfo": "ssh root:Hunter22@10.0.0.5",
    "env_password": "PGPASSWORD=" + body(10),
    "env_tracking": "MLFLOW_TRACKING_PASSWORD=" + body(12),
    "env_token_json": '{"HF_TOKEN": "' + body(20) + '"}',
    # more service formats
    "yandex_api_key": "AQVN" + body(36, string.ascii_letters + string.digits + "_-"),
    "yandex_iam": "t1." + body(30) + "." + body(86),
    "yandex_oauth": "y0_" + body(55),
    "databricks": "dapi" + body(32, HEX),
    "atlassian": "ATATT3x" + body(40),
    "google_refresh": "1//0" + body(40),
    "discord_webhook": "https://discord.com/api/webhooks/123456789012345678/" + body(68),
    "runpod": "rpa_" + body(40, string.ascii_uppercase + string.digits),
    "pinecone": "pcsk_" + body(50),
    "together": "tgp_v1_" + body(40),
    "perplexity": "pplx-" + body(48),
    "neptune_base64": "eyJhcGlfYWRkcmVzcyI6" + body(60, B64) + "==",
    "bare_aws_secret": "aws " + body(20, B64) + "/" + body(19, B64),
    "mixed_case_key_anywhere": "here it is " + body(40),
    "vault": "VAULT_ADDR=https://vault:8200 hvs." + body(90),
    "terraform_cloud": body(14) + ".atlasv1." + body(67),
    "grafana": "glsa_" + body(32) + "_" + body(8, HEX),
    "new_relic": "NRAK-" + body(27, string.ascii_uppercase + string.digits),
    "sentry": "sntrys_" + body(60, B64),
    "langsmith": "lsv2_pt_" + body(32, HEX) + "_" + body(10, HEX),
    "doppler": "dp.st.prd." + body(40),
    "square": "sq0atp-" + body(22),
    "figma": "figd_" + body(40),
    "mysql_cli": "mysql -u root -p" + body(12) + " training_db",
    "telegram_short": "bot " + body(9, string.digits) + ":AA" + body(32),
    # a value further from the password word, behind a label, or after "secret"; keys that read as names
    "en_password_far": "Password for the server is Summer2024!",
    "ru_labelled": "Пароль для входа: olma2024",
    "uz_labelled": "Parolni yuboraman: 7788aa",
    "secret_assigned": "secret: hunter2",
    "client_secret": "client_secret=abc123def456",
    "kaggle_json": '{"username":"bob","key":"a' + body(31, HEX) + '"}',  # kaggle.json is compact
    "kaggle_env": "KAGGLE_KEY=c" + body(31, HEX),
    "numeric_api_key": "api_key=" + body(20, string.digits),
    # disguises
    "zero_width": "gh\u200bp_" + body(36),
    "full_width": "ｈｆ_" + body(34, string.ascii_letters),
    # a plain word as the value: after a Cyrillic password word, behind a label at the clause's end, in quotes;
    # a login and its password; an administrator account and its password; a PIN a few words on
    "ru_plain_word": "пароль qwerty",
    "ru_label_plain": "Пароль для входа: olma",
    "en_quoted": "password 'letmein'",
    "login_pair": "user: admin, pass: admin",
    "ru_login_pair": "логин admin пароль admin",
    "login_pair_weak_word": "login admin pass admin123",
    "root_colon": "root:toor",
    "root_slash": "root/Passw0rd!",
    "account_spaced": "ubuntu / Qwerty123!",
    "account_same_word": "panel login: admin / admin",
    "account_same_word_end": "ssh as root/root.",
    "ru_pin_far": "пин-код карты 1234",
    "pin_latin_cyrillic": "PIN-код: 0000",
    "passphrase_words": "password: correct horse battery staple",
    # a weak word opening its clause, its value closing it: a label and a password however plain
    "pass_label_plain": "pass: abc",
    "pw_after_login": "user: root, pw: toor",
    "pass_label_line": "host 10.0.0.5\npass = qwerty.",
}

ORDINARY = {
    "dates": "Start 2026-12-05, finish by 2026-12-20 18:00 UTC; 2 weeks",
    "ru_dates": "Начало 5 декабря 2026, срок 14 дней, до 20.12.2026",
    "uz_dates": "Boshlanish 2026-yil 5-dekabr, muddat 14 kun",
    "regions": "Region eu-west-1 or us-east-2, europe-west4, westeurope; not ap-south-1",
    "sizes": "Dataset 120 GB, 500 GB NVMe, 2 TB object storage, 64 GiB RAM, 1.5M examples",
    "tokens_count": "tokens: 50M, max tokens = 4096, токенов: 1,2 млрд, tokenlar soni: 300 mln",
    "buckets": "Data in s3://my-training-data-2026/shards/ and gs://acme-llm-checkpoints/run-17",
    "model_ids": "meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen2.5-14B, mistralai/Mixtral-8x7B-v0.1, "
                 "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "gpus": "H100-SXM-80GB or H200-SXM-141GB, A100-80GB PCIe, RTX 4090, L40S, MI300X; 8x NVLink",
    "no_password": "SSH access with my public key, no password needed",
    "ru_no_password": "Пароль не нужен: доступ по SSH-ключу",
    "uz_no_password": "Parol kerak emas, SSH kalit orqali kirish",
    "password_for_gpu": "no password for H100-SXM nodes please",
    "key_path": "SSH key: ~/.ssh/id_ed25519.pub",
    "commit": "revision 5f0b02c75b57c5855da9ae460ce51323ea669d8a",
    "key_dates": "Key dates: Dec 5 and Dec 20; key model meta-llama/Llama-3.1-8B",
    "ru_key_words": "Ключевые требования: NVLink, 8 GPU",
    "url": "Docs at https://huggingface.co/docs/peft and http://10.0.0.5:8080/status",
    "email": "contact: ml-team@example.com",
    "uuid_free": "order 2026-0042, ticket #1337",
    "price": "budget $2.50 per GPU-hour, up to $4,000 total",
    "mixed": "QLoRA r=16, lora_alpha=32, bf16, packing=true, max_seq_length=4096, gradient_accumulation_steps=8",
    # words that hold a secret word or look like one
    "tokenizer": '"tokenizer_class": "LlamaTokenizer", "bos_token_id": 1, "pad_token_id": null',
    "ru_tokenizer": "токенизатор: LlamaTokenizerFast, токенов в батче: 16384",
    "uz_tokenizer": "tokenizatsiya: LlamaTokenizer, tokenlar: 2 mlrd",
    "pass_metric": "pass@1 = 45.2 %, a single pass over 2B tokens, two-pass packing",
    "pass_is_prose": "the pass rate is 95 %; the day pass is valid until Friday",
    "pin_memory": "pin_memory=True, num_workers=8, persistent_workers=True",
    "pin_code_not_needed": "PIN code not required",
    "env_vars": "TOKENIZERS_PARALLELISM=false MAX_TOKENS=4096 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "env_references": "HF_TOKEN=$HF_TOKEN WANDB_API_KEY=${WANDB_API_KEY} password: ******** token: <your token>",
    "auth_method": "AUTH=ssh-key; auth: ssh only; OAuth2 via the provider's console",
    "key_names": "key: num_key_value_heads, keys: lora_A, lora_B",
    "model_ids_camel": "HuggingFaceTB/SmolLM2-360M-Instruct and "
                       "HuggingFaceTB/smollm2-1.7B-8k-mix7-ep2-v2-dpo-ultraf-ep3",
    "file_path": "config from aic-core/src/aiconfigurator_core/model_configs/meta-llama--Meta-Llama-3.1-8B_config.json",
    "docker_digest": "nvcr.io/nvidia/pytorch:24.05-py3@sha256:" + "0" * 64,
    "email_label": "email:ml-team@example.com, telegram: @mlteam",
    "ru_password_later": "Пароль пришлю отдельно, по SSH-ключу",
    "time_ratio": "10:30 UTC, ratio 1:100@bs8",
    # an SSH public key is meant for the provider; prose about a password or a key; GPU names after "key:"
    "ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + body(43) + " user@laptop",
    "password_policy": "my password policy is strict; password reset is done by IT",
    "password_later_en": "Password will be sent separately by the team lead via Signal",
    "ru_key_prose": "ключ: использовать SSH",
    "key_gpu": "key: 8xH100",
    "mysql_prompt": "mysql -u root -p training_db (the password is typed at the prompt)",
    "password_manager": "password manager: Bitwarden; password policy: strong, rotated every 90 days",
    "credentials_role": "credentials: IAM role arn:aws:iam::123456789012:role/TrainingRole",
    # compounds, accounts and image tags, prose after "password:", a login without a password
    "password_compound": "password-less sudo is fine; docker login --password-stdin",
    "image_tags": "images ubuntu:jammy, postgres:16-alpine, ubuntu:22.04; paths root/lib/python3.11, admin/readme.md",
    "ru_password_root": "нужен пароль root; пароль SSH не нужен",
    "ru_password_see": "Пароль: смотрите в Bitwarden",
    "uz_password_later": "Parol: keyinroq",
    "login_password_prose": "user root, password provided.",
    "ru_label_ssh_key": "Пароль для входа: SSH-ключ",
    "admin_mode": "admin:read access is enough",
    "login_node": "login node pass-through",
    "account_same_word_prose": "root / root directory holds the data; admin / admin panel is not needed",
    "pass_sentence": "we pass: yes; eval pass: 3 of 5",
    "pass_label_prose": "Pass: the results to the team",
    "pass_label_count": "pass: 2, pw: 10",
    "pass_label_rate": "pass: 95%; pass: OK",
}


@pytest.fixture(scope="module")
def answers() -> dict[str, object]:
    node = shutil.which("node")
    if node is None:
        cannot_run("node is not installed (apt-get install nodejs)")
    texts = {**SECRETS, **ORDINARY}
    proc = subprocess.run([node, "--input-type=commonjs", "-e", RUNNER, FILTER.as_uri()],
                          input=json.dumps(list(texts.values())), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(zip(texts, json.loads(proc.stdout), strict=True))


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_secret_is_refused(answers: dict[str, object], name: str) -> None:
    assert answers[name] is not None, SECRETS[name]


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_ordinary_note_passes(answers: dict[str, object], name: str) -> None:
    assert answers[name] is None, (ORDINARY[name], answers[name])


def test_catalog_config_json_passes() -> None:
    """The request page reads a pasted config.json too: no catalog model's config (as Hugging Face writes it:
    tokenizer_class, *_token_id, num_key_value_heads) is taken for a secret."""
    node = shutil.which("node")
    if node is None:
        cannot_run("node is not installed (apt-get install nodejs)")
    data = json.loads((ROOT / "sizing" / "data" / "models.json").read_text(encoding="utf-8"))
    records = data if isinstance(data, list) else data["models"]
    texts = {r["id"]: json.dumps(r["config"], indent=2) for r in records if isinstance(r.get("config"), dict)}
    assert len(texts) >= 100
    proc = subprocess.run([node, "--input-type=commonjs", "-e", RUNNER, FILTER.as_uri()],
                          input=json.dumps(list(texts.values())), capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    refused = {name: hit for name, hit in zip(texts, json.loads(proc.stdout), strict=True) if hit is not None}
    assert refused == {}

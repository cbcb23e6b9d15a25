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
    # disguises
    "zero_width": "gh\u200bp_" + body(36),
    "full_width": "ｈｆ_" + body(34, string.ascii_letters),
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

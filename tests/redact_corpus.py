"""Two corpora for redaction: realistic secrets that must all be caught, and code and logs that must pass unchanged.

Every secret here is synthetic: generated from a fixed seed in the shape the provider documents (prefix, length,
alphabet). Nothing here is, or was, a working credential. ``bench/bench_redact.py`` scores detectors on the same
corpora.
"""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CODE", "SECRETS", "Code", "Secret", "shared_code_excerpts"]

_rng = random.Random(20261123)
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_UPPER = _LOWER.upper()
_DIGITS = "0123456789"
_ALNUM = _LOWER + _UPPER + _DIGITS
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"


def _r(alphabet: str, n: int) -> str:
    # Every class present, as generated keys have them (a draw without a digit would not be a realistic key).
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        classes = [c for c in (_LOWER, _UPPER, _DIGITS) if any(ch in c for ch in alphabet)]
        if all(any(ch in c for ch in value) for c in classes):
            return value


@dataclass(frozen=True)
class Secret:
    """``text`` holds ``values``; none of them may survive redaction."""

    label: str
    text: str
    values: tuple[str, ...]


def _s(label: str, template: str, *values: str) -> Secret:
    return Secret(label, template.format(*values), values)


_AWS_SECRET = _r(_ALNUM + "/+", 40)
_PEM_BODY = "\n".join(_r(_B64, 64) for _ in range(6)) + "\n" + _r(_B64, 20) + "=="
_PEM = f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}\n-----END PRIVATE KEY-----"


def _b64url(data: str) -> str:
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


# A well-formed token (header and claims decode to JSON, as detectors that validate JWTs require).
_JWT = (_b64url('{"alg":"HS256","typ":"JWT"}') + "." + _b64url(f'{{"sub":"{_r(_DIGITS, 10)}","exp":1893456000}}')
        + "." + _r(_ALNUM + "_-", 43))
_SLACK_HOOK = f"T{_r(_UPPER + _DIGITS, 8)}/B{_r(_UPPER + _DIGITS, 10)}/{_r(_ALNUM, 24)}"
_STRIPE = "sk_live_" + _r(_ALNUM, 99)
_OPENAI = "sk-proj-" + _r(_ALNUM + "_-", 120)

SECRETS: tuple[Secret, ...] = (
    # The forms the red team found leaking.
    _s("bare AWS secret key", "$ echo $AWS_SECRET\n{}\n", _AWS_SECRET),
    _s("AWS secret in credentials file", "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
       "AKIA" + _r(_UPPER + _DIGITS, 16), _r(_ALNUM + "/+", 40)),
    _s("Slack webhook", "curl -X POST https://hooks.slack.com/services/{} -d '{{\"text\":\"hi\"}}'", _SLACK_HOOK),
    _s("URL password with @", "DATABASE_URL=postgres://app:{}@db.internal:5432/app", "p@ss" + _r(_ALNUM, 8)),
    _s("URL password with /", "mongodb://admin:{}@mongo-0.mongo:27017/?authSource=admin", "ab/" + _r(_ALNUM, 10)),
    _s("URL password with :", "amqp://guest:{}@rabbit:5672/vhost", "x:" + _r(_ALNUM, 10) + ":y"),
    _s("URL password with @ / :", "mysql://root:{}@10.0.0.5:3306/shop", "a@b/c:" + _r(_ALNUM, 9)),
    _s("redis empty user", "REDIS_URL=redis://:{}@cache.internal:6379/0", _r(_ALNUM, 24)),
    _s("JWT_SECRET", "JWT_SECRET={}\nPORT=8080", _r(_ALNUM, 32)),
    _s("JWT_SECRET words", "JWT_SECRET=mysupersecretjwtsigningkey\n", "mysupersecretjwtsigningkey"),
    _s("DB_PASS", "export DB_PASS={}", "Tr0ub4dor&3"),
    _s("token= in URL", "GET /api/export?token={}&format=csv HTTP/1.1", _r(_ALNUM, 32)),
    _s("token= in log", "INFO auth ok user=42 token={}", _r(_ALNUM + "-", 36)),
    _s("mysql -p", "$ mysql -h db -u root -p{} shop < dump.sql", "S3cr3t" + _r(_ALNUM, 6)),
    _s("mysqldump -p quoted", "mysqldump -uroot -p'{}' --all-databases", "pa ss" + _r(_ALNUM, 5)),
    _s("Authorization Basic", "Authorization: Basic {}",
       base64.b64encode(f"deploy:{_r(_ALNUM, 16)}".encode()).decode()),
    _s("curl -H Basic", "curl -H 'Authorization: Basic {}' https://api.example.com",
       base64.b64encode(f"ci:{_r(_ALNUM, 20)}".encode()).decode()),
    _s("base64-encoded key (k8s secret)", "data:\n  api-key: {}\n", base64.b64encode(_OPENAI.encode()).decode()),
    _s("base64-encoded key alone", "value: {}\n", base64.b64encode(("AKIA" + _r(_UPPER + _DIGITS, 16)).encode())
       .decode()),
    _s("base64-encoded PEM", "tls.key: {}\n", base64.b64encode(_PEM.encode()).decode()),
    _s("Stripe live key", "stripe.api_key = '{}'", _STRIPE),
    _s("Stripe key bare", "charged with {}", "sk_live_" + _r(_ALNUM, 24)),
    _s("Stripe restricted", "{}", "rk_live_" + _r(_ALNUM, 24)),
    _s("Stripe webhook secret", "STRIPE_WEBHOOK={}", "whsec_" + _r(_ALNUM, 32)),
    _s("Hugging Face token", "huggingface-cli login --token {}", "hf_" + _r(_LOWER + _UPPER, 34)),
    # Cloud.
    _s("AWS access key id", "AccessKeyId: {}", "AKIA" + _r(_UPPER + _DIGITS, 16)),
    _s("AWS session key id", "{}", "ASIA" + _r(_UPPER + _DIGITS, 16)),
    # (The private_key_id names the key; it is not secret.)
    _s("GCP service account", '{{"type": "service_account", "private_key_id": "' + _r(_HEX, 40)
       + '", "private_key": "{}"}}', _PEM.replace("\n", "\\n")),
    _s("GCP OAuth client secret", "client_secret: {}", "GOCSPX-" + _r(_ALNUM + "_-", 28)),
    _s("GCP access token", "ya29 token {}", "ya29." + _r(_ALNUM + "_-", 80)),
    _s("Google API key", "https://maps.googleapis.com/maps/api/geocode/json?key={}", "AIza" + _r(_ALNUM + "_-", 35)),
    _s("Azure storage connection string",
       "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
       _r(_B64, 86) + "=="),
    _s("Azure SAS", "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sr=b&sig={}", _r(_ALNUM, 40) + "%3D"),
    _s("Azure AD client secret", "AZURE_CLIENT_SECRET={}", _r(_ALNUM, 3) + "8Q~" + _r(_ALNUM + "_.~-", 34)),
    _s("Azure client secret bare", "secret value {}", _r(_ALNUM, 3) + "7Q~" + _r(_ALNUM + "_.-", 34)),
    _s("DigitalOcean token", "{}", "dop_v1_" + _r(_HEX, 64)),
    # Version control and package registries.
    _s("GitHub classic PAT", "git clone https://{}@github.com/org/repo.git", "ghp_" + _r(_ALNUM, 36)),
    _s("GitHub fine-grained PAT", "GITHUB_TOKEN={}", "github_pat_" + _r(_ALNUM, 22) + "_" + _r(_ALNUM, 59)),
    _s("GitHub OAuth", "oauth {}", "gho_" + _r(_ALNUM, 36)),
    _s("GitLab PAT", "PRIVATE-TOKEN: {}", "glpat-" + _r(_ALNUM + "_-", 20)),
    _s("npm token", "//registry.npmjs.org/:_authToken={}", "npm_" + _r(_ALNUM, 36)),
    _s("npm token bare", "token {}", "npm_" + _r(_ALNUM, 36)),
    _s("PyPI token", "password = {}", "pypi-AgEIcHlwaS5vcmc" + _r(_ALNUM + "_-", 70)),
    _s("PyPI token bare", "twine upload -p {}", "pypi-AgEIcHlwaS5vcmc" + _r(_ALNUM + "_-", 70)),
    # Chat and messaging.
    _s("Slack bot token", "SLACK_BOT_TOKEN={}",
       "xoxb-" + _r(_DIGITS, 12) + "-" + _r(_DIGITS, 13) + "-" + _r(_ALNUM, 24)),
    _s("Slack user token", "{}", "xoxp-" + _r(_DIGITS, 12) + "-" + _r(_DIGITS, 12) + "-" + _r(_HEX, 32)),
    _s("Slack app token", "{}", "xapp-1-A" + _r(_UPPER + _DIGITS, 10) + "-" + _r(_DIGITS, 13) + "-" + _r(_HEX, 64)),
    _s("Discord webhook", "https://discord.com/api/webhooks/" + _r(_DIGITS, 18) + "/{}", _r(_ALNUM + "_-", 68)),
    _s("Telegram bot", "https://api.telegram.org/bot{}/getMe", _r(_DIGITS, 10) + ":AA" + _r(_ALNUM + "_-", 33)),
    _s("Twilio API key", "TWILIO_API_KEY={}", "SK" + _r(_HEX, 32)),
    _s("Twilio key bare", "key {} created", "SK" + _r(_HEX, 32)),
    _s("Twilio auth token", "TWILIO_AUTH_TOKEN={}", _r(_HEX, 32)),
    _s("SendGrid", "SENDGRID={}", "SG." + _r(_ALNUM + "_-", 22) + "." + _r(_ALNUM + "_-", 43)),
    _s("Mailgun", "api:{}", "key-" + _r(_HEX, 32)),
    # AI providers.
    _s("OpenAI legacy", "openai.api_key = \"{}\"", "sk-" + _r(_ALNUM, 48)),
    _s("OpenAI project", "export OPENAI_API_KEY={}", _OPENAI),
    _s("OpenAI project bare", "using {} now", "sk-proj-" + _r(_ALNUM + "_-", 64)),
    _s("Anthropic", "x-api-key: {}", "sk-ant-api03-" + _r(_ALNUM + "_-", 93) + "AA"),
    _s("Anthropic bare", "{}", "sk-ant-api03-" + _r(_ALNUM + "_-", 95)),
    _s("Groq", "GROQ={}", "gsk_" + _r(_ALNUM, 52)),
    _s("Replicate", "{}", "r8_" + _r(_ALNUM, 37)),
    _s("xAI", "{}", "xai-" + _r(_ALNUM, 80)),
    _s("Perplexity", "{}", "pplx-" + _r(_ALNUM, 48)),
    # Generic shapes.
    _s("private key PEM", "$ cat id_rsa\n{}\n$ ", _PEM),
    _s("RSA PEM with headers", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{}\n\n"
       "{}\n-----END RSA PRIVATE KEY-----", _r(_HEX.upper(), 32), _r(_B64, 64)),
    _s("OpenSSH key", "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
       "b3BlbnNzaC1rZXktdjEAAAAA" + _r(_B64, 40)),
    _s("PEM in JSON", '{{"key": "-----BEGIN EC PRIVATE KEY-----\\n{}\\n-----END EC PRIVATE KEY-----\\n"}}',
       _r(_B64, 64)),
    _s("JWT", "id_token={}", _JWT),
    _s("JWT bare", "cookie session={}; Path=/", _JWT),
    _s("Bearer header", "-H \"Authorization: Bearer {}\"", _r(_ALNUM, 40)),
    _s("password=", "login password={}", "hunter2-" + _r(_ALNUM, 6)),
    _s("password JSON", '{{"username": "bob", "password": "{}"}}', "correct horse " + _r(_ALNUM, 6)),
    _s("password YAML", "db:\n  password: {}\n", _r(_ALNUM, 14)),
    _s("PGPASSWORD", "PGPASSWORD={} psql -h db", _r(_ALNUM, 16)),
    _s("MYSQL_PWD", "MYSQL_PWD={}", "Zx9" + _r(_ALNUM, 9)),
    _s("client_secret", "client_secret={}", _r(_ALNUM, 40)),
    _s("api key header", "X-API-Key: {}", _r(_HEX, 32)),
    _s("curl -u", "curl -u admin:{} https://jenkins.local/api/json", _r(_ALNUM, 14)),
    _s("sshpass", "sshpass -p {} ssh root@host", "Pw" + _r(_ALNUM, 10)),
    _s("PHP array", "'password' => '{}',", _r(_ALNUM, 12)),
    _s("Go literal", 'password := "{}"', _r(_ALNUM, 12)),
    _s("Vault token", "VAULT_TOKEN={}", "hvs." + _r(_ALNUM + "_-", 95)),
    _s("Databricks", "{}", "dapi" + _r(_HEX, 32)),
    _s("Shopify", "{}", "shpat_" + _r(_HEX, 32)),
    _s("Atlassian API token", "JIRA_API={}", "ATATT3xFfGF0" + _r(_ALNUM + "_-", 170) + "=" + _r(_HEX.upper(), 8)),
)


@dataclass(frozen=True)
class Code:
    """Text that holds no secret and must come through redaction byte for byte."""

    label: str
    text: str


_GIT_SHA = _r(_HEX, 40)
_SHA256 = _r(_HEX, 64)
_UUID = "-".join(_r(_HEX, n) for n in (8, 4, 4, 4, 12))

CODE: tuple[Code, ...] = (
    Code("type annotation", "def login(user: str, password: str) -> Session:\n    ...\n"),
    Code("optional annotation",
         "class Settings(BaseModel):\n    api_key: SecretStr | None = None\n    token: str = ''\n"),
    Code("annotation with Optional", "    password: Optional[str] = None\n    api_key: Optional[str]\n"),
    Code("TypeScript annotation", "interface Creds {\n  password: string;\n  apiKey: string;\n}\n"),
    Code("comparison", "if password == confirm_password:\n    ok = True\nif token != expected_token: raise\n"),
    Code("comparison no spaces", "assert password==x and api_key==y\n"),
    Code("keyword arguments", "client = OpenAI(api_key=api_key, base_url=base_url)\nlogin(password=password)\n"),
    Code("keyword from attribute", "conn = connect(password=self.password, token=settings.TOKEN)\n"),
    Code("kwarg variable", "session = Session(token=access_token, secret=client_secret)\n"),
    Code("assignment from call", "password = getpass.getpass()\napi_key = os.environ['OPENAI_API_KEY']\n"),
    Code("assignment from variable", "    password = pw\n    token = new_token\n"),
    Code("walrus", "if (password := input()):\n    pass\n"),
    Code("YAML null", "openai:\n  api_key: ~\n  secret: null\n"),
    Code("YAML env reference", "api_key: ${OPENAI_API_KEY}\npassword: $DB_PASSWORD\n"),
    Code("placeholder", "password=<your-password>\nAPI_KEY=your-api-key-here\n"),
    Code("docstring args",
         "    Args:\n        password: the password of the user.\n        api_key: the key to call with.\n"),
    Code("PEM marker in a string literal",
         'PEM_HEADER = "-----BEGIN PRIVATE KEY-----"\nPEM_FOOTER = "-----END PRIVATE KEY-----"\n'
         "def is_pem(data):\n    return data.startswith(PEM_HEADER)\nhelper_v2_Base64Decoder3 = None\n"),
    Code("PEM marker concatenated",
         'pem = "-----BEGIN RSA PRIVATE KEY-----\\n" + body + "\\n-----END RSA PRIVATE KEY-----\\n"\n'),
    Code("PEM marker in a regex", "KEY_RE = re.compile(r'-----BEGIN (RSA )?PRIVATE KEY-----(.*?)-----END')\n"),
    Code("git hashes", f"commit {_GIT_SHA}\nAuthor: Dev <dev@example.com>\n\n    Fix the thing\n"
         f"{_GIT_SHA[:7]} HEAD@{{0}}: commit: fix\n"),
    Code("UUIDs", f"request_id={_UUID} trace={_UUID.upper()}\n"),
    Code("sha256 sums", f"{_SHA256}  contextfold-0.1.0.tar.gz\nsha256:{_SHA256}\n"),
    Code("base64 test data", 'assert b64encode(b"The quick brown fox jumps over") == '
         'b"VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVy"\n'
         'DATA = "SGVsbG8sIFdvcmxkISBUaGlzIGlzIGEgdGVzdCBvZiBiYXNlNjQgZW5jb2Rpbmcu"\n'),
    Code("base64 image data URI", 'src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4'
         '2mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="\n'),
    Code("paths", "/usr/lib/python3.11/site-packages/django/contrib/auth/hashers.py:42\n"
         "src/contextfold/summarize/extractive.py\n"),
    Code("long identifiers", "test_password_reset_token_invalid_for_inactive_user_2 PASSED\n"
         "TokenizerFast.from_pretrained(checkpoint)\n"),
    Code("tokenizer settings", 'tokenizer.pad_token = tokenizer.eos_token\neos_token="</s>", pad_token="[PAD]"\n'
         "max_token=4096\nnum_tokens: 128\n"),
    Code("bypass and compass", "bypass=1\ncompass=north\nfirst_pass=True\n"),
    Code("localhost URL with @ in path", "  ➜  Local:   http://localhost:5173/@vite/client\n"
         "see http://example.com:8080/path/user@example.com\n"),
    Code("URL without credentials", "https://user@github.com/org/repo.git\ngit@github.com:org/repo.git\n"
         "postgres://localhost:5432/app\n"),
    Code("shell PWD", "{'PWD': '/testbed', 'HOME': '/root', 'OLDPWD': '/tmp'}\n"),
    Code("log line", "2025-01-02T03:04:05Z INFO tokens=1532 prompt_tokens=1200 cache_key=abc total_tokens=1532\n"),
    Code("format placeholders", 'log.info("token: %s", token)\nprint(f"password: {password}")\n'
         'msg = "api_key={api_key}".format(api_key=k)\n'),
    Code("prompt strings", 'password = input("Password: ")\nprint("Enter your API key:", end=" ")\n'),
    Code("argparse help", 'parser.add_argument("--password", help="the password (default: $PGPASSWORD)")\n'
         "usage: tool [--token TOKEN] [--password PASSWORD]\n"),
    Code("hex color and numbers", "color: #1A2B3C\nversion: 3.11.4\nport: 5432\n"),
    Code("markdown prose", "Set the `api_key` option in your config. A bearer of good news said the "
         "password must be rotated.\n"),
    Code("rst link", ".. |CircleCI| image:: https://circleci.com/gh/org/repo.svg?style=shield&circle-token=:circle-token\n"),
    Code("base64 long test vector", "    expected = (\n        "
         "'TG9yZW0gaXBzdW0gZG9sb3Igc2l0IGFtZXQsIGNvbnNlY3RldHVyIGFkaXBpc2NpbmcgZWxpdC4='\n    )\n"),
    Code("redacted already", "password=[REDACTED:password] token [REDACTED:github_token]\n"),
)

# Tool outputs (source files, test logs) in the shared recorded sessions that show code around passwords and keys.
_SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"


def shared_code_excerpts(limit: int = 40) -> list[Code]:
    """Real tool outputs from the shared SWE-agent sessions whose text mentions a secret's name but holds no secret.

    These are the hard cases from real code: `password` parameters, `SECRET_KEY` settings, token counters. Outputs
    that do contain a literal test password (``password='test'``) are skipped: redacting those is right.
    """
    import json

    if not _SHARED.is_dir():
        return []
    keywords = ("password", "secret", "token", "api_key", "private key", "passwd")
    literal = ("password='", 'password="', "password=test", "secret_key='", "secret_key = '", "'password': '",
               '"password": "', "pgpassword': '", "x-secret", "_key='fake")
    found: list[Code] = []
    for path in sorted(_SHARED.glob("*/*.traj")):
        history = json.loads(path.read_text(encoding="utf-8")).get("history", [])
        for index, message in enumerate(history):
            content = message.get("content")
            texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content or []]
            for text in texts:
                lowered = text.lower()
                if any(k in lowered for k in keywords) and not any(k in lowered for k in literal):
                    found.append(Code(f"{path.stem}#{index}", text))
                    if len(found) >= limit:
                        return found
    return found

"""Two corpora for redaction: realistic secrets that must all be caught, and code and logs that must pass unchanged.

Every secret here is synthetic: generated from a fixed seed in the shape the provider documents (prefix, length,
alphabet). Nothing here is, or was, a working credential. ``bench/bench_redact.py`` scores detectors on the same
corpora.
"""

from __future__ import annotations

import base64
import random
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CODE", "PIECE_CHARS", "SECRETS", "Code", "Secret", "shared_code_excerpts"]

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


# A piece of a secret this long that survives redaction is a partial leak (``[REDACTED:password]&3horse``).
PIECE_CHARS = 5
_PIECE = re.compile(rf"[A-Za-z0-9]{{{PIECE_CHARS},}}")
_MARKER = re.compile(r"\[REDACTED:[^\]\n]*\]")


@dataclass(frozen=True)
class Secret:
    """``text`` holds ``values``; none of them, nor any piece of them (:meth:`pieces`), may survive redaction."""

    label: str
    text: str
    values: tuple[str, ...]

    def pieces(self) -> list[str]:
        """The values' runs of letters and digits (``PIECE_CHARS`` or more) that the text holds nowhere else."""
        context = self.text
        for value in sorted(self.values, key=len, reverse=True):
            context = context.replace(value, "\x00")
        return [p for v in self.values for p in _PIECE.findall(v) if p not in context]

    def leaked(self, redacted: str) -> list[str]:
        """What of the secret survives in ``redacted``: whole values, then pieces (markers are not pieces)."""
        rest = _MARKER.sub("\x00", redacted)
        return [v for v in self.values if v in rest] + [p for p in self.pieces() if p in rest]


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


# Issue 21: the forms a red team found the rules missing (docker auth, .netrc, XML, .pgpass, cookies, token schemes,
# command-line passwords, tails after & ; \"), configuration files (kubeconfig, k8s secrets, Maven, DSNs, .env /
# YAML / XML / JSON with escapes) and more providers' documented token shapes. Drawn after the forms above, so that
# their values stay what they were.
def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


_DOCKER_AUTH = _b64("deploy:" + _r(_ALNUM, 20))
_KUBE_TOKEN = _r(_ALNUM, 40)
_PEM_EC = ("-----BEGIN EC PRIVATE KEY-----\n" + "\n".join(_r(_B64, 64) for _ in range(2)) + "\n" + _r(_B64, 36)
           + "\n-----END EC PRIVATE KEY-----\n")
_DJANGO_SESSION = _r(_LOWER + _DIGITS, 32)
_CSRF = _r(_ALNUM, 64)
_TAIL_AMP = "Xk9#mQ&3horse" + _r(_DIGITS, 2)
_TAIL_SEMI = "w8;Lq2zR" + _r(_ALNUM, 4)
_TAIL_QUOTE = _r(_ALNUM, 5) + '\\"' + _r(_ALNUM, 7)  # ab\"cd as it stands in JSON text: an escaped quote

SECRETS_ISSUE_21: tuple[Secret, ...] = (
    # The red team's misses.
    _s("docker config.json auth", '{{\n  "auths": {{\n    "registry.example.com": {{\n      "auth": "{}"\n    }}\n'
       '  }}\n}}', _DOCKER_AUTH),
    _s(".netrc multi-line", "machine api.github.com\n  login octocat\n  password {}\n", _r(_ALNUM, 24)),
    _s(".netrc one line", "machine artifacts.example.com login ci password {}", "Zq" + _r(_ALNUM + "!#%", 14)),
    _s("XML password element", "<datasource>\n  <user>app</user>\n  <password>{}</password>\n</datasource>",
       _r(_ALNUM, 16) + "!"),
    _s(".pgpass line", "$ cat ~/.pgpass\ndb.internal:5432:app:app_user:{}\n", _r(_ALNUM, 18)),
    _s("Cookie sessionid", "Cookie: sessionid={}; csrftoken={}", _DJANGO_SESSION, _CSRF),
    _s("Authorization Token hex", "curl -H 'Authorization: Token {}' https://api.example.com/v1/items/",
       _r(_HEX, 40)),
    _s("redis-cli -a", "$ redis-cli -h cache.internal -p 6379 -a {} ping\nPONG", _r(_ALNUM, 22)),
    _s("password tail after &", "DB_PASSWORD={} ./bin/start", _TAIL_AMP),
    _s("password tail after ;", "SMTP_PASSWORD={}\nSMTP_PORT=587", _TAIL_SEMI),
    _s("password tail after escaped quote", '{{"user": "svc", "password": "{}"}}', _TAIL_QUOTE,
       _TAIL_QUOTE.split('\\"')[1]),
    _s("kubeconfig client key and token", "users:\n- name: admin\n  user:\n    client-key-data: {}\n"
       "    token: {}\n", _b64(_PEM_EC), _KUBE_TOKEN),
    _s("k8s Secret data", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
       "  DB_PASSWORD: {}\n", _b64(_r(_ALNUM, 18))),
    _s("k8s dockerconfigjson", "type: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {}\n",
       _b64('{"auths":{"ghcr.io":{"auth":"' + _b64("bot:" + _r(_ALNUM, 24)) + '"}}}')),
    _s("k8s stringData", "kind: Secret\nstringData:\n  client-secret: {}\n", _r(_ALNUM + "-_", 34)),
    _s("Vault token header", "curl -H \"X-Vault-Token: {}\" $VAULT_ADDR/v1/secret/data/app", "s." + _r(_ALNUM, 24)),
    _s("Vault batch token", "{}", "hvb." + _r(_ALNUM + "_-", 120)),
    _s("Maven settings.xml", "<servers>\n  <server>\n    <id>nexus</id>\n    <username>deployer</username>\n"
       "    <password>{}</password>\n  </server>\n</servers>", _r(_ALNUM, 20)),
    _s("Maven encrypted master", "<settingsSecurity>\n  <master>{}</master>\n</settingsSecurity>",
       "{" + _r(_B64, 44) + "=}"),
    _s("SQL Server connection string", "Server=tcp:app.database.windows.net,1433;Initial Catalog=app;"
       "User ID=app;Password={};Encrypt=True;", _r(_ALNUM, 12) + "$" + _r(_ALNUM, 4)),
    _s("ODBC PWD in braces", "Driver={{ODBC Driver 18 for SQL Server}};Server=db;UID=sa;PWD={{{}}};",
       _r(_ALNUM, 10) + ";" + _r(_ALNUM, 5)),
    _s("JDBC URL password", "jdbc:postgresql://db:5432/app?user=app&password={}&ssl=true", _r(_ALNUM, 20)),
    _s("Oracle user/password@", "$ sqlplus system/{}@//db.internal:1521/ORCLPDB1", _r(_ALNUM, 14)),
    _s("MongoDB SRV", "MONGO_URI=mongodb+srv://app:{}@cluster0.ab1cd.mongodb.net/prod?retryWrites=true",
       _r(_ALNUM, 18)),
    _s(".env quoted with escape", 'APP_SECRET="{}"\n', _r(_ALNUM, 10) + '\\"' + _r(_ALNUM, 10)),
    _s("YAML double-quoted escape", 'smtp:\n  password: "{}"\n', _r(_ALNUM, 8) + "\\u0040" + _r(_ALNUM, 8)),
    _s("JSON in JSON", '{{"config": "{{\\"api_key\\": \\"{}\\"}}"}}', _r(_ALNUM, 32)),
    _s("XML attribute", '<add name="Default" connectionString="Host=db;Username=app;Password={}" />',
       _r(_ALNUM, 16)),
    _s("EC private key", "{}", _PEM_EC.strip()),
    _s("encrypted private key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\n{}\n-----END ENCRYPTED PRIVATE KEY-----",
       "MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG" + _r(_B64, 40)),
    _s("PGP private key block", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n{}\n=" +
       _r(_B64, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----", "lQOYBF" + _r(_B64, 58)),
    _s("PuTTY key", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\nPublic-Lines: 2\n"
       "AAAAC3NzaC1lZDI1NTE5AAAAI" + _r(_B64, 40) + "\nPrivate-Lines: 1\n{}\nPrivate-MAC: " + _r(_HEX, 64),
       "AAAAI" + _r(_B64, 40)),
    _s("OpenSSH key in JSON", '{{"ssh_key": "-----BEGIN OPENSSH PRIVATE KEY-----\\n{}\\n'
       '-----END OPENSSH PRIVATE KEY-----\\n"}}', "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE" + _r(_B64, 40)),
    _s("JWT in Authorization", "Authorization: Bearer {}", _JWT),
    _s("age secret key", "# created: 2025-01-01\n{}", "AGE-SECRET-KEY-1" + _r("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    # Command lines.
    _s("docker login -p", "docker login -u ci -p {} registry.gitlab.com", _r(_ALNUM, 20)),
    _s("--password flag", "mongosh --username admin --password {} --host db", _r(_ALNUM, 16)),
    _s("--password= flag", "wget --user=ci --password={} https://files.example.com/a.tgz", _r(_ALNUM, 15)),
    _s("openssl pass:", "openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{}", _r(_ALNUM, 14)),
    _s("smbclient user%pass", "smbclient //fs/share -U corp/alice%{}", _r(_ALNUM, 12)),
    _s("sqlcmd -P", "sqlcmd -S db -U sa -P {} -Q \"SELECT 1\"", _r(_ALNUM, 12) + "!"),
    _s("ldapsearch -w", "ldapsearch -x -D cn=admin,dc=corp -w {} -b dc=corp", _r(_ALNUM, 14)),
    _s("htpasswd -b", "htpasswd -b -c /etc/nginx/.htpasswd admin {}", _r(_ALNUM, 12)),
    # Headers and generic keys.
    _s("Authorization Bot", "Authorization: Bot {}", "MT" + _r(_ALNUM, 22) + "." + _r(_ALNUM, 6) + "."
       + _r(_ALNUM + "_-", 38)),
    _s("Okta SSWS", "Authorization: SSWS {}", "00" + _r(_ALNUM + "_-", 40)),
    _s("Apim subscription key", "Ocp-Apim-Subscription-Key: {}", _r(_HEX, 32)),
    _s("Azure Functions key", "x-functions-key: {}", _r(_ALNUM, 54) + "=="),
    _s("session token AWS", "aws_session_token = {}", "IQoJb3JpZ2luX2VjE" + _r(_B64, 200)),
    _s("Azure DevOps PAT", "AZURE_DEVOPS_EXT_PAT={}", _r(_LOWER + "234567", 52)),
    _s("consumer secret", "TWITTER_CONSUMER_SECRET={}", _r(_ALNUM, 50)),
    _s("npmrc _auth", "registry=https://npm.corp/\n_auth={}\nalways-auth=true", _b64("ci:" + _r(_ALNUM, 18))),
    # More providers' shapes.
    _s("Bitbucket app password", "{}", "ATBB" + _r(_ALNUM, 28) + _r(_HEX.upper(), 8)),
    _s("Docker Hub PAT", "{}", "dckr_pat_" + _r(_ALNUM + "_-", 27)),
    _s("RubyGems key", "{}", "rubygems_" + _r(_HEX, 48)),
    _s("NuGet key", "nuget push pkg.nupkg -k {}", "oy2" + _r(_LOWER + _DIGITS, 43)),
    _s("Alibaba AccessKey", "{}", "LTAI" + _r(_ALNUM, 20)),
    _s("Cloudflare origin CA key", "{}", "v1.0-" + _r(_HEX, 24) + "-" + _r(_HEX, 146)),
    _s("Linear", "{}", "lin_api_" + _r(_ALNUM, 40)),
    _s("Notion", "{}", "ntn_" + _r(_ALNUM, 46)),
    _s("Postman", "{}", "PMAK-" + _r(_HEX, 24) + "-" + _r(_HEX, 34)),
    _s("Sentry auth token", "{}", "sntrys_" + _r(_ALNUM, 60) + "_" + _r(_ALNUM, 43)),
    _s("Grafana service account", "{}", "glsa_" + _r(_ALNUM, 32) + "_" + _r(_HEX, 8)),
    _s("New Relic user key", "{}", "NRAK-" + _r(_UPPER + _DIGITS, 27)),
    _s("Dynatrace token", "{}", "dt0c01." + _r(_UPPER + _DIGITS, 24) + "." + _r(_UPPER + _DIGITS, 64)),
    _s("Doppler token", "{}", "dp.pt." + _r(_ALNUM, 43)),
    _s("Pulumi token", "{}", "pul-" + _r(_HEX, 40)),
    _s("Terraform Cloud token", "{}", _r(_ALNUM, 14) + ".atlasv1." + _r(_ALNUM + "_-", 67)),
    _s("Supabase token", "{}", "sbp_" + _r(_HEX, 40)),
    _s("Figma token", "{}", "figd_" + _r(_ALNUM + "_-", 40)),
    _s("Airtable PAT", "{}", "pat" + _r(_ALNUM, 14) + "." + _r(_HEX, 64)),
    _s("Mapbox secret", "{}", "sk.eyJ1Ijoi" + _r(_ALNUM, 50) + "." + _r(_ALNUM + "_-", 22)),
    _s("Square access token", "{}", "EAAA" + _r(_ALNUM + "_-", 60)),
    _s("Square OAuth secret", "{}", "sq0csp-" + _r(_ALNUM + "_-", 43)),
    _s("Braintree access token", "{}", "access_token$production$" + _r(_LOWER + _DIGITS, 16) + "$" + _r(_HEX, 32)),
    _s("Mailchimp", "{}", _r(_HEX, 32) + "-us21"),
    _s("Brevo", "{}", "xkeysib-" + _r(_HEX, 64) + "-" + _r(_ALNUM, 16)),
    _s("Facebook token", "{}", "EAACEdEose0cBA" + _r(_ALNUM, 120)),
    _s("Twitter bearer", "{}", "A" * 22 + _r(_ALNUM, 30) + "%3D" + _r(_ALNUM, 50)),
    _s("Teams webhook", "https://corp.webhook.office.com/webhookb2/" + _r(_HEX, 8) + "@" + _r(_HEX, 8)
       + "/IncomingWebhook/{}", _r(_HEX, 32) + "/" + _r(_HEX, 8) + "-" + _r(_HEX, 4) + "-" + _r(_HEX, 4) + "-"
       + _r(_HEX, 4) + "-" + _r(_HEX, 12)),
    _s("1Password service account", "{}", "ops_eyJ" + _r(_ALNUM + "+/", 180)),
    _s("JFrog API key", "{}", "AKCp" + _r(_ALNUM, 69)),
    _s("CircleCI token", "{}", "CCIPAT_" + _r(_ALNUM, 22) + "_" + _r(_HEX, 40)),
    _s("Google refresh token", "{}", "1//0" + _r(_ALNUM + "_-", 60)),
    _s("Firebase server key", "{}", "AAAA" + _r(_ALNUM + "_-", 7) + ":APA91b" + _r(_ALNUM + "_-", 134)),
    _s("LangSmith key", "{}", "lsv2_pt_" + _r(_HEX, 32) + "_" + _r(_HEX, 10)),
    _s("Pinecone key", "{}", "pcsk_" + _r(_ALNUM, 6) + "_" + _r(_ALNUM, 64)),
    _s("Tavily key", "{}", "tvly-" + _r(_ALNUM, 32)),
    _s("Fireworks key", "{}", "fw_" + _r(_ALNUM, 24)),
    _s("ElevenLabs key", "{}", "sk_" + _r(_HEX, 48)),
    _s("OpenRouter key", "{}", "sk-or-v1-" + _r(_HEX, 64)),
    _s("GitHub app installation token", "{}", "ghs_" + _r(_ALNUM, 36)),
    _s("GitLab runner token", "{}", "glrt-" + _r(_ALNUM + "_-", 20)),
    _s("Slack config token", "{}", "xoxe.xoxp-1-" + _r(_ALNUM, 160)),
    _s("WooCommerce secret", "{}", "cs_" + _r(_HEX, 40)),
)
SECRETS = (*SECRETS, *SECRETS_ISSUE_21)


@dataclass(frozen=True)
class Code:
    """Text that holds no secret and must come through redaction byte for byte."""

    label: str
    text: str


_GIT_SHA = _r(_HEX, 40)
_SHA256 = _r(_HEX, 64)
_UUID = "-".join(_r(_HEX, n) for n in (8, 4, 4, 4, 12))

# Issue 21: code, configuration and logs around the new rules' contexts that hold no secret. The first two are the
# snippets the red team saw broken (shell parameter expansion with a default or an error message).
CODE_ISSUE_21: tuple[Code, ...] = (
    Code("shell expansion with an error", "services:\n  db:\n    environment:\n"
         "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?set it}\n"),
    Code("shell expansion with a default", "environment:\n  - POSTGRES_PASSWORD=${POSTGRES_PASSWORD:-postgres}\n"
         "  - REDIS_URL=${REDIS_URL:=redis://cache:6379/0}\n"),
    Code("GitHub Actions secrets", "env:\n  DB_PASSWORD: ${{ secrets.DB_PASSWORD }}\n"
         "  token: ${{ secrets.GITHUB_TOKEN }}\n"),
    Code("Maven property reference", "<server>\n  <id>nexus</id>\n  <username>${env.NEXUS_USER}</username>\n"
         "  <password>${env.NEXUS_PASSWORD}</password>\n</server>\n"),
    Code("XML empty password", "<connection>\n  <password></password>\n  <password/>\n</connection>\n"),
    Code("XML password placeholder", "<password>CHANGE_ME</password>\n<secret>${SECRET}</secret>\n"),
    Code("token type and auth kind", 'token_type: "Bearer"\nauth: "basic"\nauthType: oauth2\n'),
    Code("Authorization header placeholders", "Authorization: Token <token>\nAuthorization: Bearer $TOKEN\n"
         "Authorization: Bearer ${ACCESS_TOKEN}\n"),
    Code("redis-cli with a variable", 'redis-cli -a "$REDIS_PASSWORD" ping\nredis-cli -h cache -p 6379 info\n'),
    Code("ssh public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl "
         "deploy@ci\n"),
    Code("subresource integrity", '<script src="app.js" integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/'
         'uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC" crossorigin="anonymous"></script>\n'),
    Code("npm lockfile integrity", '"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXP'
         's17LhbZVGedAJv8XZ1tvj5FvSg==",\n'),
    Code("k8s secretKeyRef", "env:\n- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db-credentials\n"
         "      key: password\n"),
    Code("Terraform sensitive variable", 'variable "db_password" {\n  type      = string\n  sensitive = true\n}\n'
         'password = var.db_password\n'),
    Code("Django settings", 'AUTH_PASSWORD_VALIDATORS = [\n    {"NAME": "django.contrib.auth.password_validation.'
         'MinimumLengthValidator"},\n]\nPASSWORD_RESET_TIMEOUT = 259200\nSESSION_COOKIE_AGE = 1209600\n'),
    Code("pgpass documentation", "Each line of .pgpass has the format:\n"
         "hostname:port:database:username:password\n*:*:*:postgres:*\n"),
    Code("Java password read", 'char[] password = console.readPassword("Password: ");\n'
         "String token = request.getHeader(\"X-Auth-Token\");\n"),
    Code("random secret key generation", "secret_key = os.urandom(32)\napi_key = secrets.token_urlsafe(32)\n"),
    Code("npmrc with a variable", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n_auth=${NPM_AUTH}\n"),
    Code("password hashing", "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())\n"
         "if not check_password(raw_password, user.password): raise AuthError\n"),
    Code("placeholder keys", 'api_key = "sk-..."\nOPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx\n'
         'STRIPE_KEY=sk_test_XXXXXXXXXXXXXXXXXXXXXXXX\n'),
    Code("docker login with variables", 'docker login -u "$CI_REGISTRY_USER" -p "$CI_REGISTRY_PASSWORD" '
         "$CI_REGISTRY\necho \"$TOKEN\" | docker login --password-stdin -u ci ghcr.io\n"),
    Code("git LFS pointer", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22e"
         "adbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"),
    Code("image digest", "image: nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31\n"),
    Code("masked password", 'password = "********"\nDB_PASSWORD=****\n'),
    Code("tokenizer code", "tokens = tokenizer.encode(text)\nmax_tokens = 4096\ntoken_count = len(tokens)\n"
         "token_ids = [t for t in tokens if t != pad_token_id]\n"),
    Code("app.config empty secret", '<add key="ClientSecret" value="" />\n<add key="Password" value="" />\n'),
    Code("header parsing", 'const token = req.headers.authorization?.split(" ")[1];\n'
         'if (!process.env.API_KEY) throw new Error("API_KEY is not set");\n'),
    Code("ansible vault tag", "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n"
         "  62313365396662343061393464336163383764373764613633653634306231386433626436623361\n"),
    Code("cookie without session", "Cookie: theme=dark; lang=en-US; tz=Europe%2FBerlin\n"
         "Set-Cookie: seen_banner=1; Path=/; Max-Age=31536000\n"),
    Code("cookie read in code", 'session_id = request.cookies.get("sessionid")\n'
         "response.set_cookie('sessionid', session.session_key, httponly=True)\n"),
    Code("kubectl with variables", 'kubectl create secret generic db --from-literal=password="$DB_PASSWORD"\n'
         "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d\n"),
    Code("commands asking for a password", "mysql -u root -p\npsql -h localhost -U postgres -W\n"
         "mongosh --username admin --password\nsqlcmd -S db -U sa\n"),
    Code("curl with variables", 'curl -u "$USER:$PASS" https://api.example.com\n'
         'PGPASSWORD="$(cat /run/secrets/pg)" psql\n'),
    Code("kubeconfig with files", "users:\n- name: minikube\n  user:\n"
         "    client-certificate: /home/me/.minikube/profiles/minikube/client.crt\n"
         "    client-key: /home/me/.minikube/profiles/minikube/client.key\n"),
    Code("certificate block", "-----BEGIN CERTIFICATE-----\n"
         "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
         "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD\n-----END CERTIFICATE-----\n"),
    Code("netrc with a variable", "machine api.heroku.com\n  login me@example.com\n  password $HEROKU_API_KEY\n"),
    Code("pytest log with colons", "tests/test_auth.py:42: in test_login\n    assert resp.status_code == 200\n"
         "E   AssertionError: assert 401 == 200\nsrc/app/auth.py:118:check_token:WARNING:expired\n"),
    Code("grep hits with ports", "config/settings.py:12:DATABASE_PORT = 5432\n"
         "docker-compose.yml:8:      - 5432:5432\nnginx.conf:3:    listen 8080:80;\n"),
    Code("openssl prompts", "openssl pkcs12 -export -in c.pem -out c.p12 -passout env:P12_PASS\n"
         "openssl rsa -in key.pem -passin file:/run/secrets/pass -out plain.pem\n"),
    Code("ldap without password", "ldapsearch -x -H ldap://ldap.corp -b dc=corp '(uid=alice)' -W\n"),
    Code("sqlplus with a wallet", "sqlplus /@prod_wallet\nsqlplus -s / as sysdba @script.sql\n"),
    Code("XML schema password element", '<xs:element name="password" type="xs:string"/>\n'
         '<xs:element name="token" type="xs:string" minOccurs="0"/>\n'),
    Code("JSON Schema", '{"properties": {"password": {"type": "string", "minLength": 12}, '
         '"api_key": {"type": "string", "format": "password"}}}\n'),
    Code("OpenAPI security scheme", "securitySchemes:\n  ApiKeyAuth:\n    type: apiKey\n    in: header\n"
         "    name: X-API-Key\n  cookieAuth:\n    type: apiKey\n    in: cookie\n    name: sessionid\n"),
    Code("CSS and hex", ".btn { color: #3b82f6; background: url(data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3"
         "dy53My5vcmcvMjAwMC9zdmciLz4=); }\n"),
    Code("version strings", "Python 3.12.4 (main, Jun  6 2024)\nnode v20.11.1\nnpm 10.2.4\nopenssl 3.0.13\n"),
    Code("UUID lists", "\n".join(f"{_r(_HEX, 8)}-{_r(_HEX, 4)}-4{_r(_HEX, 3)}-a{_r(_HEX, 3)}-{_r(_HEX, 12)}"
                               for _ in range(3)) + "\n"),
    Code("email and phone in text", "Contact: Jane Roe <jane.roe@example.com>, +1 415 555 0100\n"),
    Code("AWS ARN and ids", "arn:aws:iam::123456789012:role/deploy\ni-0abcd1234efgh5678\nsubnet-0bb1c79de3EXAMPLE\n"),
    Code("markdown about tokens", "## Tokens\nA token is created with `create_token(user)` and revoked with "
         "`revoke_token(token_id)`. Passwords are never logged.\n"),
    # A recorded SWE-agent session's test script printed these; remembered as a password, "Content-Length" was then
    # redacted from every later file listing and reply of the session.
    Code("test status lines", "PASS: Content-Length header is NOT present in GET request.\nPASS: test_eof\n"
         "FAIL: test_empty_body\nPass: Content-Type kept\n"),
    Code("test status lines in JSON", '{"file_text": "print(\\"\\\\nPASS: Content-Length header is absent.\\")"}\n'),
)

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
    *CODE_ISSUE_21,
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

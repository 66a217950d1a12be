"""Provider tokens recognised by their shape alone: a documented prefix, then the alphabet and length of the key.

Each rule was written from the provider's own documentation of its token format (prefix, length, alphabet); the
coverage of public secret scanners (detect-secrets, gitleaks, trufflehog) was used as a checklist of providers,
not as a source of rules. Shapes without a prefix (a 32-digit hex key) are left to the context rules.
"""

from __future__ import annotations

import re

from ._pattern import TOKEN_CHARS, SecretPattern, filler, pattern, prefixed

__all__ = ["TOKEN_PATTERNS"]


def _mixed_case(m: re.Match[str]) -> bool:
    """A random body mixes upper and lower case (``hf_`` + a word is a name, not a token)."""
    body = m.group()[3:]
    return any(c.isupper() for c in body) and any(c.islower() for c in body) and not filler(body)


def _random_body(m: re.Match[str]) -> bool:
    """Not a template's filling (``sk-xxxxxxxxxxxxxxxxxxxx``, ``sk_test_XXXXXXXX``)."""
    return not filler(m.group())


# Order matters only to break ties between findings of the same span: the more specific kind wins the name.
TOKEN_PATTERNS: tuple[SecretPattern, ...] = (
    # -- AI providers
    pattern("anthropic_key", rf"sk-ant-(?<![{TOKEN_CHARS}]sk-ant-)[A-Za-z0-9_\-]{{20,}}", "sk-ant-",
            accept=_random_body),
    pattern("openai_key", rf"sk-(?<![{TOKEN_CHARS}]sk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{{20,}}", "sk-",
            accept=_random_body),
    prefixed("groq_key", r"gsk_", r"[A-Za-z0-9]{48,}", "gsk_"),
    prefixed("replicate_token", r"r8_", r"[A-Za-z0-9]{37}", "r8_"),
    prefixed("xai_key", r"xai-", r"[A-Za-z0-9]{70,}", "xai-"),
    prefixed("perplexity_key", r"pplx-", r"[A-Za-z0-9]{40,}", "pplx-"),
    prefixed("huggingface_token", r"hf_", r"[A-Za-z0-9]{30,}", "hf_", accept=_mixed_case),
    prefixed("langsmith_key", r"lsv2_(?:pt|sk)_", r"[a-f0-9]{32}_[a-f0-9]{10}", "lsv2_"),
    prefixed("pinecone_key", r"pcsk_", r"[A-Za-z0-9]{4,12}_[A-Za-z0-9]{40,}", "pcsk_"),
    prefixed("tavily_key", r"tvly-", r"(?:dev-|prod-)?[A-Za-z0-9]{32}", "tvly-"),
    prefixed("fireworks_key", r"fw_", r"[A-Za-z0-9]{24,}", "fw_", accept=_mixed_case),
    prefixed("elevenlabs_key", r"sk_", r"[a-f0-9]{48}", "sk_"),
    # -- cloud
    pattern("aws_access_key", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
            "akia", "asia", "abia", "acca"),
    prefixed("google_api_key", r"AIza", r"[0-9A-Za-z_\-]{35}", "aiza"),
    prefixed("google_oauth", r"GOCSPX-", r"[A-Za-z0-9_\-]{28}", "gocspx-"),
    prefixed("google_oauth", r"ya29\.", r"[A-Za-z0-9_\-]{20,}", "ya29."),
    pattern("google_oauth", r"1//0(?<![A-Za-z0-9_\-/]1//0)[A-Za-z0-9_\-]{40,}", "1//0"),
    pattern("firebase_key", r"AAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{100,}", ":apa91b"),
    pattern(
        "azure_client_secret",
        r"Q~(?<=[A-Za-z0-9_.\-]{3}[0-9]Q~)(?<![A-Za-z0-9_.~\-]....Q~)[A-Za-z0-9_.~\-]{31,34}(?![A-Za-z0-9_.~\-])",
        "q~",
    ),
    pattern("azure_sas_signature", r"[?&]sig=(?P<v>[A-Za-z0-9%+/=]{20,})", "sig="),
    prefixed("digitalocean_token", r"do[por]_v1_", r"[a-f0-9]{64}", "_v1_"),
    prefixed("alibaba_key", r"LTAI", r"[A-Za-z0-9]{12,30}", "ltai", accept=_mixed_case),
    prefixed("cloudflare_key", r"v1\.0-", r"[a-f0-9]{24}-[a-f0-9]{146}", "v1.0-"),
    prefixed("doppler_token", r"dp\.", r"(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}", "dp."),
    prefixed("pulumi_token", r"pul-", r"[a-f0-9]{40}", "pul-"),
    pattern("terraform_token", rf"(?<![{TOKEN_CHARS}])[A-Za-z0-9]{{14}}\.atlasv1\.[A-Za-z0-9_=\-]{{60,70}}",
            ".atlasv1."),
    prefixed("supabase_token", r"sbp_", r"[a-f0-9]{40}", "sbp_"),
    prefixed("vault_token", r"hv[sb]\.", r"[A-Za-z0-9_\-]{90,}", "hvs.", "hvb."),
    prefixed("databricks_token", r"dapi", r"[a-f0-9]{32}(?:-\d)?", "dapi"),
    prefixed("dynatrace_token", r"dt0c01\.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}", "dt0c01."),
    prefixed("newrelic_key", r"NRAK-", r"[A-Z0-9]{27}", "nrak-"),
    prefixed("grafana_token", r"glsa_", r"[A-Za-z0-9]{32}_[a-f0-9]{8}", "glsa_"),
    prefixed("grafana_token", r"glc_", r"[A-Za-z0-9+/]{32,}={0,2}", "glc_"),
    prefixed("sentry_token", r"sntry[su]_", r"[A-Za-z0-9+/=_]{50,}", "sntrys_", "sntryu_"),
    prefixed("onepassword_token", r"ops_eyJ", r"[A-Za-z0-9+/=_\-]{100,}", "ops_eyj"),
    prefixed("age_secret_key", r"AGE-SECRET-KEY-1", r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "age-secret-key-"),
    # -- version control, CI and package registries
    # (a "-" after the token is a separator: "ghp_…-1" in a file name or a counter; "_" would continue a name)
    pattern("github_token", rf"gh[pousr]_(?<![{TOKEN_CHARS}]gh[pousr]_)[A-Za-z0-9]{{36,}}(?![A-Za-z0-9_])",
            "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    prefixed("github_token", r"github_pat_", r"[A-Za-z0-9_]{22,}", "github_pat_"),
    prefixed("gitlab_token", r"gl(?:pat|ptt|cbt|oas)-", r"[A-Za-z0-9_\-]{20,}", "glpat-", "glptt-", "glcbt-",
             "gloas-"),
    prefixed("gitlab_token", r"gl[dr]t-", r"[A-Za-z0-9_\-]{20,}", "gldt-", "glrt-"),
    prefixed("bitbucket_token", r"ATBB", r"[A-Za-z0-9_=.\-]{32,}", "atbb", accept=_mixed_case),
    prefixed("npm_token", r"npm_", r"[A-Za-z0-9]{36}", "npm_"),
    prefixed("pypi_token", r"pypi-AgE", r"[A-Za-z0-9_\-]{50,}", "pypi-"),
    prefixed("dockerhub_token", r"dckr_pat_", r"[A-Za-z0-9_\-]{27,}", "dckr_pat_"),
    prefixed("rubygems_key", r"rubygems_", r"[a-f0-9]{48}", "rubygems_"),
    prefixed("nuget_key", r"oy2", r"[a-z0-9]{43}", "oy2"),
    prefixed("jfrog_token", r"AKCp", r"[A-Za-z0-9]{69}", "akcp"),
    prefixed("jfrog_token", r"cmVmdGtu", r"[A-Za-z0-9+/]{50,}={0,2}", "cmvmdgtu"),
    prefixed("circleci_token", r"CCIPAT_", r"[A-Za-z0-9]{22}_[a-f0-9]{40}", "ccipat_"),
    prefixed("atlassian_token", r"ATATT3", r"[A-Za-z0-9_\-=]{100,}", "atatt3"),
    # -- chat, mail and collaboration
    pattern("slack_token", rf"xox(?<![{TOKEN_CHARS}]xox)[abposre]-[A-Za-z0-9\-]{{10,}}", "xox"),
    prefixed("slack_token", r"xapp-", r"\d-[A-Za-z0-9\-]{10,}", "xapp-"),
    pattern(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/\-]{20,})",
        "hooks.slack.com",
    ),
    pattern("discord_webhook", r"discord(?:app)?\.com/api/webhooks/\d+/(?P<v>[A-Za-z0-9_\-]{30,})", "discord"),
    pattern("teams_webhook", r"/IncomingWebhook/(?P<v>[A-Za-z0-9]{32}/[A-Fa-f0-9\-]{36})", "/incomingwebhook/"),
    pattern("telegram_bot_token", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])", ":aa"),
    prefixed("sendgrid_key", r"SG\.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", "sg."),
    prefixed("twilio_key", r"SK", r"[0-9a-fA-F]{32}", "sk"),
    prefixed("mailgun_key", r"key-", r"[0-9a-f]{32}", "key-"),
    pattern("mailchimp_key", r"(?<![A-Za-z0-9])[a-f0-9]{32}-us\d{1,2}(?![A-Za-z0-9])", "-us"),
    prefixed("brevo_key", r"xkeysib-", r"[a-f0-9]{64}-[A-Za-z0-9]{16}", "xkeysib-"),
    prefixed("brevo_key", r"xsmtpsib-", r"[a-f0-9]{64}-[A-Za-z0-9]{16}", "xsmtpsib-"),
    prefixed("linear_key", r"lin_api_", r"[A-Za-z0-9]{40}", "lin_api_"),
    prefixed("notion_token", r"ntn_", r"[A-Za-z0-9]{46}", "ntn_"),
    prefixed("notion_token", r"secret_", r"[A-Za-z0-9]{43}", "secret_", accept=_mixed_case),
    prefixed("postman_key", r"PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}", "pmak-"),
    prefixed("figma_token", r"figd_", r"[A-Za-z0-9_\-]{40}", "figd_"),
    # (No trigger: "pat" is in every path; bulk redaction looks for the token's shape instead.)
    pattern("airtable_token", rf"pat(?<![{TOKEN_CHARS}]pat)[A-Za-z0-9]{{14}}\.[a-f0-9]{{64}}(?![{TOKEN_CHARS}])",
            needs=r"pat[a-z0-9]{14}\.[a-f0-9]{64}"),
    prefixed("mapbox_token", r"sk\.eyJ", r"[A-Za-z0-9_\-]{20,}\.[A-Za-z0-9_\-]{20,}", "sk.eyj"),
    pattern("facebook_token", r"EAA(?<![A-Za-z0-9]EAA)[A-Za-z0-9]{90,}(?![A-Za-z0-9])", "eaa"),
    pattern("twitter_token", r"(?<![A-Za-z0-9%])A{22}[A-Za-z0-9%]{30,}", "a" * 22),
    # -- payments and commerce
    prefixed("stripe_key", r"[sr]k_(?:live|test)_", r"[A-Za-z0-9]{16,}", "_live_", "_test_", accept=_random_body),
    prefixed("stripe_key", r"whsec_", r"[A-Za-z0-9]{24,}", "whsec_"),
    prefixed("square_token", r"EAAA", r"[A-Za-z0-9_\-]{60}", "eaaa"),
    prefixed("square_token", r"sq0(?:atp|csp)-", r"[A-Za-z0-9_\-]{22,43}", "sq0"),
    pattern("braintree_token", r"access_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}", "access_token$"),
    prefixed("shopify_token", r"shp(?:at|ss|ca|pa)_", r"[a-fA-F0-9]{32}", "shp"),
    prefixed("woocommerce_secret", r"cs_", r"[a-f0-9]{40}", "cs_"),
)

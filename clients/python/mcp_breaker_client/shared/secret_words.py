"""The words that name a credential, in the languages error texts are written in.

Data for :mod:`mcp_breaker_client.shared.redact` (and its TypeScript port, ``clients/typescript/
src/redact.ts``, which spells the same lists): English, French, German, Spanish,
Portuguese, Italian, Dutch, Russian, Chinese, Japanese and Korean, and a few more words
for password where they are common in software (Polish, Turkish, Swedish, Norwegian,
Danish, Finnish, Czech, Hungarian). A word here decides nothing alone: the rules that read
what follows it are redact.py's.
"""

from __future__ import annotations

# Written in prose before the secret ("le mot de passe est X"), in Latin or Cyrillic
# script: words between spaces. A space stands for " ", "_", "-" or nothing, as in
# redact_prose._PROSE_KEYWORDS. A value after these goes unless it is an ordinary follow-word.
PASSWORD_WORDS_ABROAD = (
    "mot de passe", "mdp", "passwort", "kennwort", "contraseña", "contrasena", "clave",
    "senha", "parola d'ordine", "wachtwoord", "пароль", "hasło", "haslo", "şifre", "sifre",
    "lösenord", "losenord", "passord", "adgangskode", "salasana", "heslo", "jelszó",
)  # fmt: skip
# Other secrets in prose: a value after these goes when it is secret-shaped.
OTHER_WORDS_ABROAD = (
    "jeton", "clé api", "clef api", "clé secrète", "clave de api", "clave secreta",
    "chave da api", "chave de api", "chave secreta", "chiave api", "chiave segreta",
    "api schlüssel", "geheimer schlüssel", "api sleutel", "geheime sleutel", "ключ api",
    "секретный ключ", "токен", "секрет", "geheimnis", "secreto", "segredo", "segreto",
)  # fmt: skip

# Chinese, Japanese and Korean write no space between a word and the next: the value is
# the run of another script right after the word and its particle ("密码是abc123",
# "パスワードはhunter2です", "비밀번호는 x1"). Longer forms first.
CJK_PASSWORD_WORDS = ("暗証番号", "パスワード", "비밀번호", "密码", "密碼", "口令", "암호")
CJK_OTHER_WORDS = (
    "APIキー", "API 키", "API키", "トークン", "秘密鍵", "令牌", "密钥", "密鑰", "秘钥", "토큰",
)  # fmt: skip
# What may stand between such a word and its value: a separator or the particle of a
# copula or topic ("是", "为", "は", "는", "은").
CJK_PARTICLES = ("是", "为", "為", "は", "が", "を", "는", "은", "이", "가", ":", "：", "=", "＝")

# Key names (``name=value``, ``<name>value</name>``) compared once folded: accents and
# other marks dropped, lower case, no "_", "-", "." or space. A name that ends in one of
# these names a secret ("mot_de_passe", "API-Schlüssel", "pąsswörd", "令牌").
KEY_NAME_ENDINGS_ABROAD = (
    "passwort", "kennwort", "motdepasse", "contrasena", "wachtwoord", "пароль", "losenord",
    "adgangskode", "passord", "salasana", "jelszo", "paroladordine", "geheimnis", "secreto",
    "segredo", "segreto", "секрет", "токен", "schlussel", "sleutel", "cleapi", "clefapi",
    "clavedeapi", "chavedaapi", "chavedeapi", "chiaveapi", "ключapi", "密码", "密碼", "口令",
    "パスワード", "暗証番号", "비밀번호", "암호", "令牌", "密钥", "密鑰", "秘钥", "トークン",
    "토큰", "apiキー", "api키",
)  # fmt: skip
# Short ones end ordinary words ("vehicle", "autoclave"): only as the whole name or its
# last part ("db_senha", "clé").
KEY_NAMES_ABROAD = (
    "mdp", "senha", "haslo", "sifre", "heslo", "jeton", "clave", "chave", "chiave", "cle",
    "clef", "ключ",
)  # fmt: skip
# The English endings, for a name with a letter outside ASCII ("pässword") and for XML
# elements; an ASCII name in English is redact_patterns.BARE_PAIR's to judge.
KEY_NAME_ENDINGS_ENGLISH = (
    "password", "passwd", "passphrase", "passcode", "secret", "token", "apikey", "accesskey",
    "secretkey", "privatekey", "signingkey", "credential", "credentials",
)  # fmt: skip

# Words that follow a password word in error texts in those languages ("mot de passe
# incorrect", "das Passwort ist zu kurz"): seen on a value, they keep it readable.
STOP_WORDS_ABROAD = (
    # French
    "incorrect", "incorrecte", "invalide", "expiré", "expirée", "requis", "requise",
    "obligatoire", "trop", "court", "courte", "erroné", "erronée", "manquant", "manquante",
    "vide", "oublié", "ne", "pas", "doit", "a", "été", "de", "du", "pour", "est", "faible",
    "changé", "modifié", "réinitialisé", "perdu",
    # German
    "falsch", "ungültig", "abgelaufen", "erforderlich", "zu", "kurz", "ist", "muss", "fehlt",
    "nicht", "für", "vergessen", "leer", "schwach", "wurde", "geändert", "zurückgesetzt",
    "benötigt", "der", "die", "das", "ein", "eine", "und", "oder", "lautet",
    # Spanish
    "incorrecta", "incorrecto", "inválida", "inválido", "caducada", "caducado", "expirada",
    "expirado", "requerida", "requerido", "obligatoria", "demasiado", "corta", "corto", "es",
    "debe", "para", "olvidada", "vacía", "débil", "cambiada", "restablecida",
    # Portuguese
    "incorreta", "incorreto", "obrigatória", "muito", "curta", "é", "deve", "não", "esquecida",
    "vazia", "fraca", "alterada", "redefinida", "inválidas",
    # Italian
    "errata", "errato", "non", "valida", "valido", "scaduta", "scaduto", "richiesta",
    "obbligatoria", "troppo", "è", "per", "di", "dimenticata", "vuota", "debole", "modificata",
    # Dutch
    "onjuist", "ongeldig", "verlopen", "vereist", "te", "kort", "moet", "niet", "voor", "van",
    "vergeten", "leeg", "zwak", "gewijzigd", "luidt",
    # Russian
    "неверный", "неверен", "неправильный", "недействителен", "истёк", "истек", "требуется",
    "слишком", "короткий", "не", "должен", "для", "от", "пустой", "слабый", "изменён",
    "изменен", "сброшен",
)  # fmt: skip
# Copulas of those languages, as " is " in English: "le mot de passe est X".
COPULAS_ABROAD = (
    "est", "était", "ist", "lautet", "war", "es", "era", "fue", "é", "foi", "è", "luidt", "это",
)  # fmt: skip

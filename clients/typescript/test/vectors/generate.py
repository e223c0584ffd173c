"""Test vectors for the TypeScript client, from mcp-breaker's own Python implementation.

    python generate.py            # write fingerprint.json and redact.json beside this file
    python generate.py --check    # exit 1 when the committed files differ from what it makes
    python generate.py --oracle   # answer JSON lines on stdin (for the randomized tests)

Run with the repository's venv (``.venv/bin/python``): it imports the Python client's
``shared`` modules, and the redaction corpora of its tests (``clients/python/tests``). The TypeScript tests run ``--check`` and ``--oracle`` themselves,
so the vectors cannot fall out of step with the Python code they come from.

A fingerprint vector gives the arguments as JSON text, written as ``JSON.stringify``
writes numbers (integers as digits up to 1e21, other numbers in their shortest form):
the TypeScript side hashes what a JavaScript value sends, and the Python side what it
reads from that text.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
# tests/test_redact_corpus.py's corpora: error texts with one secret each, and texts that
# must come back as written, of shapes the rules were not written case by case for.
REDACTION_CORPUS = REPO / "tests" / "fixtures" / "redaction"
sys.path.insert(0, str(REPO))

from mcp_breaker_client.shared import secret_words  # noqa: E402
from mcp_breaker_client.shared.fingerprint import arguments_digest, canonical_json, fingerprint, fingerprints  # noqa: E402
from mcp_breaker_client.shared.outcome import Signals, judge  # noqa: E402
from mcp_breaker_client.shared.redact import DEFAULT_MAX_CHARS, redact  # noqa: E402
from mcp_breaker_client.shared.result import read_result  # noqa: E402
from mcp_breaker_client.shared import messages  # noqa: E402

SERVERS = ["playwright", "", "sérveur", "a\u0000b"]
ARGUMENT_TEXTS = [
    "{}",
    "[]",
    "null",
    "true",
    '"a string"',
    '{"url":"https://artifacts.example.test/run/1539078028959944794"}',
    '{"b":1,"a":2,"c":{"z":[1,2,{"y":null,"x":false}],"a":"A"}}',
    '{"int":2,"float":2.5,"neg":-0.0,"tiny":1.5e-7,"small":0.0001,"smaller":0.00001}',
    '{"big":10000000000000000,"huge":1e+21,"bigger":1.2345e+25,"max":1.7976931348623157e+308}',
    # Not 9007199254740993: past 2**53 a JavaScript number cannot hold it, so no JavaScript
    # value sends that text.
    '{"safe":9007199254740991,"unsafe":-9007199254740992,"frac":123456789.123456789}',
    '{"pi":3.141592653589793,"third":0.3333333333333333,"e":2.718281828459045e-10}',
    '{"esc":"quote \\" backslash \\\\ slash / nl \\n tab \\t cr \\r bs \\b ff \\f",'
    '"ctl":"\\u0000\\u001f\\u007f\\u0085"}',
    '{"unicode":"héllo wörld ✓ 日本語 😀","\\ud83d\\ude00":"emoji key","\\uffff":"bmp top"}',
    '{"\\ue000":1,"\\ud800\\udc00":2,"a":3,"\\u00e9":4,"Z":5,"":6}',
    '{"lone":"\\ud800 and \\udfff","\\udbff":"lone key"}',
    '{"line":"\\u2028\\u2029","bom":"\\ufeff","nbsp":"\\u00a0"}',
    '[1,[2,[3,[4,[5,[6,[7,[8,[9,[10,[11,[12,[13,[14,[15,[16,[17,[18,[19,[20,[21,[22,[23,'
    "[24,[25,[26,[27,[28,[29,[30,[31,[32,[33,[34,[35]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    '{"a":' * 33 + "1" + "}" * 33,
    '{"a":' * 32 + "1" + "}" * 32,
    '{"args_hash":"9f2c0b6e"}',
]
TOOLS = ["browser_navigate", "playwright__browser_navigate", "ツール"]

MORE_REDACTION_INPUTS = [
    ("tab\tand\u00a0nbsp\u2003em\u3000ideographic\u2028line\x1cfs\x85nel", 300),
    ("bom\ufeffkept zero\u200bwidth kept", 300),
    ("bidi \u202eoverride\u202c and \u2066isolate\u2069", 300),
    ("controls \x00\x07\x7f\x9f gone", 300),
    ("lone \ud800 surrogate and pair 😀 kept", 300),
    ("😀" * 50 + " tail", 20),
    ("😀" * 10, 5),
    ("a😀b " * 40, 30),
    ("𝒜𝒷𝒸 /home/𝒜/file.txt 𝒹𝑒𝒻", 300),
    ("token=😀😀😀 password:ünïcödé", 300),
    ("Ünïcode_pässword=sekret Tökén: abc", 300),
    ("ßtoken=x ſtoken=y Kelvin\u212atoken=z", 300),
    ("Bearer ſſſ and Bearer \u212aelvin", 300),
    ("path C:\\Users\\ünï\\key.pem and \\\\server\\share\\x", 300),
    ("mail ünï@example.com and a.b+c@ex-ample.co.uk.", 300),
    ("see https://exämple.com/ünï?q=1 and ftp://u:p@h/x#f.", 300),
    ("id 0123456789abcdef0123456789abcdef0123 and AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 300),
    ("sk-" + "A1" * 40, 300),
    ("x " * 595 + "sk-" + "A1" * 40, 300),
    ("password: hunter2 and more", 13),
    ("alpha beta gamma", 11),
    ("alphabetagamma", 5),
    ("anything", 1),
    ("   leading and trailing   ", 300),
    ("", 300),
    ("word " * 100, 64),
    ("API_KEY=abc123 HOME=/root PATH=/usr/bin:/bin", 300),
    ("'api_key': 'k' \"secret\" = \"s\" session-id=42; cookie: a=b", 300),
    ("Authorization: Bearer token", 300),
    ("Authorization: token ghp_abcdefghijklmnopqrstuvwxyz0123456789", 300),
    ("./relative ../up ~/home .\\win ..\\winup", 300),
    ("-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjE -----END OPENSSH PRIVATE KEY-----", 300),
    # Prose, and Python's re.IGNORECASE, which takes "İ" and "ı" for "i" (JavaScript's /iu
    # does not) and no combining mark for a letter (/iu takes U+0345 for one).
    ("password İs x apı_key=x1 basıc abc123 PİN 4921 sessıon ıd 4f9a2c", 300),
    ("x\u0345password=abc x\u0345basic abc123 \u0345token tkn9f8e7", 300),
    ("paſſword swordfish pa\u017f\u017fword=x \u212aey=1 api \u212aey k3y", 300),
    ("PASSWORD=[redacted] password=[redacted] token [redacted]x", 300),
    ("Basic Basic x1 Bearer bearer Basic dXNl password: Basic/x.txt", 300),
    ("Bearer abc.def.ghiftp://h/x.42 token: Bearer… pwd=Basic@x", 300),
    ("token hUnTeR TokenExpiredError TokenExpireD ǅungla ΣΑΣ McDonald iPhone", 300),
    ("password ǅungla, password Ǆ, password ǆ. password ª! token x" + "y" * 19, 300),
    ('\'get_token\': disk full "pin": "4921" \'token\': [REDACTED] "otp":883921', 300),
    ("[REDACTED],api key x1 password <path>/x password a@<path>. token (x1)", 300),
    ("password for user bob rejected; token of account ci-bot: t1 secret set to s3t", 300),
    ("password is too short, password OK, password oK, password o\u212a", 300),
    ("my password is Tr0ub4dor&3. the token is swordfish", 24),
    # Pair values that run over "&", ";" and ",", short key words as parts of a key name,
    # escaped JSON and MySQL's -p. Python ignores case in the pair patterns ("%3d", "İ", "ſ",
    # the Kelvin sign), but not in ENV_ASSIGNMENT nor in the camel-case steps of a key name.
    ("user%3dbob%26password%3dLowEnc77%26x%3d1 PGPASSWORD%3dabc HOME=a%26b%3dc FOO=x%26y%3Dz", 300),
    ("\u212aey=abc pa\u017f\u017f=abc PW=abc dbPa\u017f\u017f=x keyıd=x KEYID=x", 300),
    ("acce\u017f\u017f\u212aey\u0130d=x accessKey\u0130d=x key_İD=x keyId=x keyid=x", 300),
    ("İkey=x ıpass=x ßkey=x épw=x ÉPass=x 日本key=x x٣key=x key٣=x", 300),
    ("APIKEYS=x apiKeys=x myPWD=x MyPw=x myPW=x XMLKey=x XMLkey=x aKEY=x KEYring=x", 300),
    ("Key: x KEY：x pass ： x passId: x key_value: x pw: x dbKey: x db_pass: x pw：x", 300),
    ("password=a&&b password=a&[REDACTED]b password=a&[redacted]b password=a)&b", 300),
    ("password=a;&,b=c password=a;&,b password=a,;&", 300),
    ("password=a%26%26b=1 password=a%%26b%3D1 password=a%2 password=%26x password=%", 300),
    ("password=a&b=1 password=a&b＝1 password=a&b%3d1 API_KEY=a&b%3d1 API_KEY=a&b%3D1", 300),
    ('x{\\"Token\\": \\"a b\\", \\"pin\\":12} {\\"secret\\"=[REDACTED]}', 300),
    ('{\\"api_key\\"：\\"k\\"} {\\"session\\"%3d\\"s\\"} {\\"secret\\":[redacted]}', 300),
    ('{\\"auth\\":-1.5e+3,\\"n\\":1} {\\"token\\":\\"open', 300),
    ('{"password": "a\\\\", "user": "bob"} {"token": "a\\\\\\"b"} {"secret": "x\\', 300),
    ("émysql -pX mysql_x -pX xmysql -pX mysql-cli -pX /usr/bin/mysql -pX MYSQL -pX", 300),
    ("mysql -p'a b' -p\"c d\" -p[REDACTED] -p -pX…y mysql -u r -p'open", 300),
    ("mysql -u root -pA & mysql -pB; mysqladmin -pC | mysqlshow -pD mariadb -pG mysqlsh -pH", 300),
    ("mysql --host=h\t-pTab\u00a0-pNbsp 'mysql -pQ' \"mysql -pR\"", 300),
    ("a=1%26password%3Dx%26b%3D2 a=1&amp;password=x&amp;b=2", 300),
    ("key=Bearer abc pw=bearer pass=Token/x", 300),
    ("password=Tr0ub4dor&3, user=bob; token=a,b,c, next " * 3, 40),
]
# The pairs of clients/python/tests/test_shared_redact_prose.py's property test: each key with each separator,
# and a value with "&", ";" or "," before what must stay.
PAIR_SEPARATORS = ["=", " = ", "＝", "%3D"]
PAIR_VALUES = ["Tr0ub4dor&3", "abc;def123", "a,b,c;d&e", "x!#*+-"]
PAIR_AFTERS = ["", " rejected", "&user=bob", "; retry", ", user=bob", "%26x%3D1"]


def corpus_texts() -> list[str]:
    """The texts of every redaction corpus, read as tests/test_redact_corpus.py reads them."""
    texts = []
    for path in sorted(REDACTION_CORPUS.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            texts += [json.loads(line)["text"] for line in lines if line.strip()]
    return texts


def secret_word_inputs() -> list[tuple[str, int]]:
    """Each word of secret_words where it decides, so a port's copy of the lists is checked
    word by word: a keyword before a plain word and a copula, a key name, a stop word."""
    prose = secret_words.PASSWORD_WORDS_ABROAD + secret_words.OTHER_WORDS_ABROAD
    texts = [
        f"{word} swordfish, {word.upper()} {copula} hunter"
        for word in prose
        for copula in secret_words.COPULAS_ABROAD[:1]
    ]
    texts += [
        f"error: {word} {copula} swordfish"
        for word in prose[:3]
        for copula in secret_words.COPULAS_ABROAD
    ]
    texts += [
        f"passwort {word}, mot de passe {word.capitalize()}"
        for word in secret_words.STOP_WORDS_ABROAD
    ]
    names = (
        secret_words.KEY_NAME_ENDINGS_ABROAD
        + secret_words.KEY_NAMES_ABROAD
        + secret_words.KEY_NAME_ENDINGS_ENGLISH
    )
    texts += [f"{name}=v1 db_{name}: v2 <{name}>v3</{name}> xé{name}=v4" for name in names]
    cjk = secret_words.CJK_PASSWORD_WORDS + secret_words.CJK_OTHER_WORDS
    texts += [
        f"{word}{particle}abc123 {word} {particle} x"
        for word in cjk
        for particle in secret_words.CJK_PARTICLES[: 1 + len(word) % 4]
    ]
    texts += [
        f"{word}{particle}x1です" for word in cjk[:1] for particle in secret_words.CJK_PARTICLES
    ]
    return [(text, DEFAULT_MAX_CHARS) for text in texts]


def redaction_inputs() -> list[tuple[str, int]]:
    """The Python suite's own cases and its redaction corpora, then more that a port to
    another language may miss."""
    sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))
    from test_shared_redact import EXACT, GONE_AND_KEPT
    from test_shared_redact_prose import PAIR_KEYS, SECRETS, SURVIVORS

    cases = [(case[1], 300) for case in EXACT] + [(case[1], 300) for case in GONE_AND_KEPT]
    cases += [(case[1], 300) for case in SECRETS] + [(text, 300) for text in SURVIVORS]
    # Each key with each separator; the value changes with the key, the rest with the pair.
    pairs = [
        (key + separator + value + PAIR_AFTERS[i % len(PAIR_AFTERS)], 300)
        for i, (key, separator) in enumerate(itertools.product(PAIR_KEYS, PAIR_SEPARATORS))
        for value in [PAIR_VALUES[i // len(PAIR_SEPARATORS) % len(PAIR_VALUES)]]
    ]
    cases += [(text, DEFAULT_MAX_CHARS) for text in corpus_texts()]
    return cases + MORE_REDACTION_INPUTS + pairs + secret_word_inputs()


def fingerprint_vector(server: str, tool: str, arguments_json: str) -> dict[str, Any]:
    arguments = json.loads(arguments_json)
    return {
        "server": server,
        "tool": tool,
        "arguments_json": arguments_json,
        "canonical_json": canonical_json(arguments),
        "fingerprint": fingerprint(server or None, tool, arguments),
        "arguments_digest": arguments_digest(arguments),
        "fingerprints": list(fingerprints(server or None, tool, arguments)),
    }


def vectors() -> dict[str, list[dict[str, Any]]]:
    prints = [
        fingerprint_vector(server, tool, text)
        for text in ARGUMENT_TEXTS
        for server, tool in zip(SERVERS * len(TOOLS), TOOLS * len(SERVERS), strict=True)
    ]
    redactions = [
        {"text": text, "max_chars": max_chars, "redacted": redact(text, max_chars=max_chars)}
        for text, max_chars in redaction_inputs()
    ]
    return {"fingerprint.json": prints, "redact.json": redactions}


def encoded(items: list[dict[str, Any]]) -> str:
    # ASCII with \u escapes: lone surrogates survive, and JSON.parse reads them back as such.
    return json.dumps(items, indent=1, ensure_ascii=True) + "\n"


def verdict_of(recorded: dict[str, Any]) -> dict[str, Any]:
    """How the service judges an ``mcp.tool.call`` span that recorded these (the harness
    convention: ``processor/classify/dialects.py``), as ``src/outcome.ts`` should."""
    result = read_result(None, is_error=recorded["isError"])
    verdict = judge(
        Signals(
            outcome_attribute=recorded["outcome"],
            error_type=recorded["errorType"],
            status_error=recorded["statusError"],
            status_message=recorded["error"],
            exceptions=tuple((kind, message) for kind, message in recorded["exceptions"]),
            refused_by_advisory=recorded["refused"],
            is_error=result.is_error,
            result_text=result.text,
        )
    )
    outcome = verdict.outcome.value
    return {
        "outcome": outcome,
        "failureClass": verdict.failure_class.value if verdict.failure_class else None,
        "excerpt": verdict.error_excerpt if outcome == "failed" else "",
    }


def message_of(request: dict[str, Any]) -> str:
    """The words the service writes for what ``src/messages.ts`` writes alone."""
    subject = messages.tool_subject(request["tool"], request["server"])
    if request["template"] == "refused_without_message":
        return messages.refused_without_message(subject, cause=request["why"])
    template = getattr(messages, request["template"])
    return str(template(subject, why=request["why"]))


def oracle() -> None:
    """One JSON request a line in, one JSON answer a line out."""
    for line in sys.stdin:
        request = json.loads(line)
        if request["kind"] == "fingerprint":
            answer = fingerprint_vector(request["server"], request["tool"], request["arguments_json"])
        elif request["kind"] == "verdict":
            answer = verdict_of(request)
        elif request["kind"] == "message":
            answer = {"message": message_of(request)}
        else:
            answer = {"redacted": redact(request["text"], max_chars=request["max_chars"])}
        sys.stdout.write(json.dumps(answer, ensure_ascii=True) + "\n")
        sys.stdout.flush()


def main() -> int:
    if "--oracle" in sys.argv:
        oracle()
        return 0
    stale = []
    for name, items in vectors().items():
        path = HERE / name
        text = encoded(items)
        if "--check" in sys.argv:
            if not path.exists() or path.read_text(encoding="ascii") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="ascii")
    if stale:
        print(f"stale: {', '.join(stale)}; run {Path(__file__).name} to write them again")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

/**
 * Redaction gives what mcp-breaker's Python code gives: the shared vectors (the Python
 * suite's own cases, its redaction corpora and more), then randomized error texts judged
 * by the Python code.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import { ConfigError, redact } from "@mcp-breaker/client";

import { VECTORS } from "./support/paths.js";
import { PythonOracle, seeded } from "./support/python.js";

interface Vector {
  text: string;
  max_chars: number;
  redacted: string;
}

const vectors = JSON.parse(readFileSync(join(VECTORS, "redact.json"), "utf8")) as Vector[];

describe("redact", () => {
  test("gives the shared vectors' answers", () => {
    assert.ok(vectors.length >= 800); // the corpora of tests/fixtures/redaction among them
    for (const vector of vectors) {
      assert.equal(
        redact(vector.text, vector.max_chars),
        vector.redacted,
        vector.text.slice(0, 120),
      );
    }
  });

  test("removes the secrets of a failing reconnect and keeps what failed", () => {
    const text =
      'reconnect upstream MCP "https://admin:s3cr3t@10.0.0.7:8931/mcp?api_key=k1": Unauthorized';
    const redacted = redact(text);
    for (const gone of ["admin", "s3cr3t", "k1"]) assert.ok(!redacted.includes(gone), redacted);
    assert.ok(redacted.includes("10.0.0.7:8931/mcp") && redacted.includes("Unauthorized"));
  });

  test("removes what follows a credential word in other syntaxes and languages", () => {
    const texts = [
      "sshpass -p 'opensesame' scp a.txt host: exit 5",
      "curl -u admin:Curl9pw https://example.com: 401",
      '<wsse:Password Type="PasswordText">XmlPw1</wsse:Password>',
      "le mot de passe est Bonjour! et pässword=Gëheim",
      "the password was changed from OldPw1 to NewPw2",
      "密码是abc123",
      "key 9fJk2LmQ8rTzX4vB1nW7 rejected",
    ];
    const secrets = ["opensesame", "Curl9pw", "XmlPw1", "Bonjour", "Gëheim", "OldPw1", "NewPw2"];
    const redacted = texts.map((text) => redact(text)).join(" ");
    for (const gone of [...secrets, "abc123", "9fJk2LmQ8rTzX4vB1nW7"]) {
      assert.ok(!redacted.includes(gone), redacted);
    }
    assert.ok(redacted.includes("sshpass -p") && redacted.includes("mot de passe est"));
  });

  test("reads a megabyte no further than its scan limit, and caps the result", () => {
    const redacted = redact("password=" + "s".repeat(1_000_000));
    assert.ok(Array.from(redacted).length <= 300 && redacted.endsWith("…"));
  });

  test("refuses a cap below one character", () => {
    assert.throws(() => redact("x", 0), ConfigError);
  });
});

describe("randomized error texts, judged by the Python implementation", () => {
  const oracle = new PythonOracle();
  after(() => oracle.close());

  test("any text redacts the same on both sides", async () => {
    const random = seeded(943);
    for (let i = 0; i < 4000; i++) {
      const pieces = Math.floor(random() * 14);
      let text = "";
      for (let j = 0; j < pieces; j++) text += FRAGMENTS[Math.floor(random() * FRAGMENTS.length)];
      const maxChars = random() < 0.7 ? 300 : 1 + Math.floor(random() * 120);
      assert.equal(
        redact(text, maxChars),
        await oracle.redact(text, maxChars),
        JSON.stringify(text),
      );
    }
  });
});

// Pieces of error texts as tool servers write them, and of what should never pass.
const FRAGMENTS = [
  " ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "\x1c", "\x85", "\ufeff", "\u200b",
  "upstream MCP session is closed", " (reconnect also failed: ", "Bad Request", ")", ": ",
  "http://127.0.0.1:8931/mcp", "https://user:pw@db.example.com:5432/app?token=abc#frag",
  "https://hooks.slack.com/services/T0/B0/XXXXXXXXXXXXXXXX", "ftp://h/x.", "wss://h:1/",
  "/etc/passwd", "/mcp", "/home/alice/.ssh/id_rsa", "~/secrets", "./run.sh", "..\\up",
  "C:\\Users\\bob\\key.pem", "\\\\server\\share", "secret/file.txt", "tools/call", "I/O",
  "alice@example.com", "a.b+c@ex-ample.co.uk", "ünï@exämple.com",
  "password=", "token: ", "'api_key': ", '"secret" = ', "Cookie: sid=8f7e6d5c4b3a;",
  "Authorization: Bearer ", "Basic ", "bearer token", "Bearer abc.def.ghi", "HOME=/root",
  "API_KEY=abc123", "session-id=42", "[REDACTED]", "<path>", "…",
  "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "sk-", "task-scheduler-service",
  "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "AKIAIOSFODNN7EXAMPLE", "AIza0123456789abcdefghij",
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.sig",
  "-----BEGIN PRIVATE KEY-----", "MIIEvQIBADANBgkqhkiG9w0", "-----END PRIVATE KEY-----",
  "0123456789abcdef0123456789abcdef01", "dGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZzEy==",
  "é", "日本語", "\u{1f600}", "\u{1d49c}", "\ud800", "\udfff", "\u202e", "\u2066", "\x00", "\x7f",
  "ſ", "\u212a", "Ü", "MCP error -32602: Invalid params", "Unknown tool: no_such_tool",
  '"', "'", ",", ";", "&", ".", "!", "?", "=", "@", "-", "_", "x", "42",
  // Prose: keywords, fillers and words that are secrets or not, and the letters that
  // Python's re.IGNORECASE and JavaScript's /iu fold differently ("İ", "ı", U+0345).
  "password ", "passwd", "Passphrase", "pwd", "the token ", "tokens", "api key ", "X-Api-Key",
  "db_password", "client secret", "session id", "auth token", "PIN ", "otp", "mfa code",
  "one-time code", "authorization", "secret", '"pin"', "'token'", " is ", " was ", " equals ",
  " set to ", " for user bob", " of account ci-bot", " is set to ", "hunter2prose",
  "tkn9f8e7d6c5", "k3y-7781", "swordfish", "expired", "invalid", "hUnTeR", "TokenExpiredError",
  "Tr0ub4dor&3", "abcdefghijklmnopqrstuvwxyz", "'a b'", "(expired)", "Basic/x.txt", "Bearer…",
  "[redacted]", "İ", "ı", "\u0345", "ι", "ǅ", "ª",
  // Pairs: values that run over "&", ";" and "," up to the next key, short key words as a
  // part of a key name or alone, fullwidth and URL-encoded separators, escaped JSON, and a
  // MySQL client's glued -p.
  "pass", "pw", "key", "Key", "KEY", "dbPass", "DB-PASS", "db_pass", "accessKeyId",
  "secretAccessKey", "APIKey", "Id", "_value", "compass", "hotkey", "keyboard", "passage",
  "key: not found", "pass=", "pw: ", "key=", "＝", "：", "%3D", "%3d", "%26", "%", "a=1&",
  "&b=2", "%26x%3D1", "]", "}", "(", '\\"', '{\\"client_secret\\":\\"', '\\":', "ab\\\"cd",
  "mysql", "mysqldump -u root", "mariadb", " -p", " -pS3cret", " -p'two words'", "-P 3306",
  "cp -pr", " | gzip",
  // Command lines: options naming a secret, commands whose short option takes a password
  // (and "ssh -p 22", which does not), a user and password in one option, a uid:gid.
  "--password ", "--api-key=", "-passin pass:", "--password-stdin", "-PASSWORD ", "--token :",
  "sshpass", "redis-cli", "sqlcmd", "ldapsearch", "mongosh", "docker login", "helm registry login",
  "az login", "ssh", " -a ", " -P ", " -w ", " -p ", "-u ", "--user=", "-U ", "bob:", "bob%",
  "bob,", "1000:1000", "hunter2", "'quoted pw'",
  // XML, named values, key names abroad or with accents, CJK words and their particles.
  "<password>", "</password>", "<wsse:Password Type=\"t\">", "</wsse:Password>", "<param ",
  'name="token">', "</param>", 'key="Password" value="', "name: DB_PASSWORD value: ", "/>",
  "pässword=", "contraseña: ", "mot_de_passe=", "API-Schlüssel=", "db_senha=", "clé:", "ﹰ",
  "¨", "Pąsswörd", "ẞ", "ß", "ł", "ø", "\u0301", "密码", "密碼是", "パスワードは", "です",
  "비밀번호는 ", "API 키", "apiキー", "ｘ", "秘密鍵=",
  // Prose in other languages, and verbs of setting.
  "le mot de passe est ", "das Passwort ist ", "ПАРОЛЬ ", "пароль: ", "ᲂ", "ᲃ", "ᲄ", "ŞİFRE ",
  "hasło ", "jeton ", "clé api ", " était ", " é ", " это ", "incorrect", "zu kurz", "не",
  " was reset to ", " has been changed to ", " changed from ", " to ", " rotated to ",
  " set to expire", " is now ", "default",
  // Keys by a scanner's prefix, by a mark in their middle, and runs that look random.
  "sk_live_", "SG.", "hf_", "key-", "secret_", "npm_", "xkeysib-", "value-store", "Ab3",
  "secret_manager_unavailable", "abcdefghij0123456789", "atlasv1", ".atlasv1.", "Q~",
  "abcdefghijklmn", "PuTTY-User-Key-File-2: ", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
  "9fJk2LmQ8rTzX4vB1nW7", "Http2ServerConnectionHandler", "A3TX", "ABIA", "MTk4NjIyNDgzNDcxOTI1MjQ4",
]; // prettier-ignore

/**
 * Where the tests find the repository around the package: the Python service they run
 * for real, and its venv (`./scripts/test` or `scripts/test-typescript` make it).
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// This file runs as build/test/support/paths.js.
export const PACKAGE_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const REPO_ROOT = resolve(PACKAGE_ROOT, "../..");
const VENV_BIN = join(REPO_ROOT, ".venv", "bin");
export const PYTHON = process.env.MCP_BREAKER_PYTHON ?? join(VENV_BIN, "python");
export const MCP_BREAKER = process.env.MCP_BREAKER_BIN ?? join(VENV_BIN, "mcp-breaker");
export const VECTORS = join(PACKAGE_ROOT, "test", "vectors");
export const BUILD_TEST = join(PACKAGE_ROOT, "build", "test");

export function requireVenv(): void {
  for (const path of [PYTHON, MCP_BREAKER]) {
    if (!existsSync(path)) {
      throw new Error(
        `${path} is missing: the tests run the Python service from the repository's venv; ` +
          "run scripts/test-typescript (or ./scripts/test) from the repository root first",
      );
    }
  }
}

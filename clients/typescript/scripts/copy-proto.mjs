// The advisory contract ships with the build: dist/proto/ is a copy of the repository's
// proto/ made by every build, so the client loads the very file the service serves.
import { cpSync, mkdirSync } from "node:fs";

const source = new URL("../../../proto/mcp_breaker/v1/advisories.proto", import.meta.url);
const target = new URL("../dist/proto/mcp_breaker/v1/", import.meta.url);
mkdirSync(target, { recursive: true });
cpSync(source, new URL("advisories.proto", target));

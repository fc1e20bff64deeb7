// Regenerates proxy.config.json from the embedded defaults (src/config/schema.ts).
// A test checks that the committed file equals the defaults.
import { writeFileSync } from "node:fs";
import { DEFAULTS } from "../dist/config/schema.js";
writeFileSync(new URL("../proxy.config.json", import.meta.url), JSON.stringify(DEFAULTS, null, 2) + "\n");

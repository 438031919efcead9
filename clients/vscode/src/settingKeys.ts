// The `interpreter.*` settings this extension contributes (from its manifest, so the list cannot drift).

import manifest from "../package.json";
import { settingKeys } from "./settings";

export const SETTING_KEYS: readonly string[] = settingKeys(manifest);

import type { Linter } from "eslint";
/** folder → the folders it may import (besides itself). */
export declare const ALLOWED_IMPORTS: Readonly<Record<string, readonly string[]>>;
/** One flat-config block per folder, plus the public-entry rule for operators, the CLI and scripts. */
export declare function architectureConfigs(root?: string): Linter.Config[];

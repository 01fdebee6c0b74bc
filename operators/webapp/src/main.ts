/** Entry point: runs the operator until SIGTERM (flags and their environment fallbacks: see --help). */
import { runOperator } from "opkit";
import operator from "./operator.ts";

await runOperator(operator);

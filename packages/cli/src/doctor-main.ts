/**
 * The entry of `opkit doctor` that runs on any Node from 18 up: the launcher (bin/opkit.js) imports it
 * instead of the CLI when the Node running it is too old for the rest of opkit. It loads nothing but
 * the doctor, which imports only Node's built-ins.
 */
import { doctorMain } from "./commands/doctor.ts";

process.exitCode = await doctorMain(process.argv.slice(3));

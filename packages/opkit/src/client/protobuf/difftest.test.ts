/**
 * The decoder against Go itself: scripts/gen-protobuf/difftest writes random objects of every GA kind (the
 * round-trip fuzzer of k8s.io/apimachinery, normalized by a protobuf round trip as etcd storage does) and
 * hand-made ones, each as protobuf and as encoding/json's JSON; every object must decode to exactly that
 * JSON. Skipped where no Go toolchain or its modules are installed. More objects: OPKIT_PROTOBUF_DIFFTEST=<per kind>;
 * other objects: OPKIT_PROTOBUF_DIFFTEST_SEED=<n> (a fixed seed by default, so a run can be repeated).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { kindDecoder, decodeTable } from "./decode.ts";
import { KINDS } from "./messages.ts";

const GEN = fileURLToPath(new URL("../../../../../scripts/gen-protobuf", import.meta.url));

function haveGo(): boolean {
  try {
    execFileSync("go", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe(
  "protobuf decoder against Go's encoding/json",
  { skip: haveGo() ? false : "no Go toolchain" },
  () => {
    it("decodes random and hand-made objects of every GA kind to exactly their JSON", (t) => {
      const perKind = process.env.OPKIT_PROTOBUF_DIFFTEST ?? "20";
      const seed = process.env.OPKIT_PROTOBUF_DIFFTEST_SEED ?? "1";
      let out: string;
      try {
        out = execFileSync("go", ["run", "./difftest", perKind, seed], {
          cwd: GEN,
          encoding: "utf8",
          maxBuffer: 1 << 30,
          stdio: ["ignore", "pipe", "pipe"],
          // Offline: the modules of scripts/gen-protobuf are there (make protobuf fetched them) or the test skips.
          env: { ...process.env, GOFLAGS: "-mod=mod", GOPROXY: "off" },
        });
      } catch (err) {
        const { stderr } = err as { stderr?: string | Buffer };
        const text = typeof stderr === "string" ? stderr : (stderr?.toString("utf8") ?? "");
        if (/GOPROXY=off|module lookup disabled/.test(text)) return void t.skip("Go modules not downloaded");
        throw err;
      }
      const lines = out.trim().split("\n");
      const differ: string[] = [];
      let compared = 0;
      for (const line of lines) {
        const [key, wire, json] = line.split("\t") as [string, string, string];
        const id = KINDS[key];
        if (id === undefined) continue; // left to JSON (a nested apiVersion and kind)
        compared++;
        const buf = Buffer.from(wire, "base64");
        const want = JSON.stringify(JSON.parse(json));
        const got = JSON.stringify(kindDecoder(id).item(buf, 0, buf.length, false, decodeTable()));
        if (got === want) continue;
        let i = 0;
        while (i < got.length && got[i] === want[i]) i++;
        const at = (s: string): string => s.slice(Math.max(0, i - 120), i + 120);
        differ.push(`${key} at ${i}:\n  decoded: ${at(got)}\n  Go JSON: ${at(want)}`);
      }
      assert.ok(compared > 50 * 10, `compared ${compared} objects`);
      assert.deepEqual(differ.slice(0, 5), [], `${differ.length} of ${compared} differ`);
    });
  },
);

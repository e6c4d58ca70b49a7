// spyglass skill verify: which line of a Node script made a call (loaded with NODE_OPTIONS=--require).
// Writes one JSON line per file, network or process call to audit-node-<pid>.jsonl beside this file,
// with the first stack frame outside Node's own modules. The kernel's events stay the evidence.
"use strict";
(function () {
  const fs = require("fs");
  const path = require("path");
  const here = __dirname;
  let fd;
  try {
    fd = fs.openSync(path.join(here, "audit-node-" + process.pid + ".jsonl"), "a");
  } catch (e) {
    return;
  }
  const write = fs.writeSync;
  let busy = false;
  function where() {
    const stack = (new Error().stack || "").split("\n").slice(2);
    for (const line of stack) {
      if (/[( ]node:/.test(line)) continue;
      const m = line.match(/\(?((?:\/|file:\/\/)[^()]*?):(\d+):\d+\)?\s*$/);
      if (!m) continue;
      const file = m[1].replace(/^file:\/\//, "");
      if (file.startsWith(here) || file.startsWith("node:")) continue;
      return [file, Number(m[2])];
    }
    return null;
  }
  function record(event, args) {
    if (busy) return;
    busy = true;
    try {
      const w = where();
      if (w) {
        const rec = { event, args: args.map((a) => (typeof a === "string" ? a.slice(0, 400) : a)), file: w[0],
          line: w[1], argv: process.argv, cwd: process.cwd() };
        write(fd, JSON.stringify(rec) + "\n");
      }
    } catch (e) {
      // never disturb the script
    } finally {
      busy = false;
    }
  }
  function wrap(obj, name, fn) {
    const orig = obj[name];
    if (typeof orig !== "function") return;
    obj[name] = function (...args) {
      try { fn(...args); } catch (e) { /* ignore */ }
      return orig.apply(this, args);
    };
  }
  const p = (x) => (typeof x === "string" ? x : x && x.toString ? x.toString() : String(x));
  const writeFlag = (f) => typeof f === "string" && /[wa+]/.test(f);
  for (const n of ["readFileSync", "readFile", "createReadStream"]) wrap(fs, n, (f) => record("open", [p(f), "r", 0]));
  for (const n of ["writeFileSync", "writeFile", "createWriteStream"]) wrap(fs, n, (f) => record("open", [p(f), "w", 1]));
  for (const n of ["appendFileSync", "appendFile"]) wrap(fs, n, (f) => record("open", [p(f), "a", 1]));
  for (const n of ["openSync", "open"]) wrap(fs, n, (f, fl) => record("open", [p(f), writeFlag(fl) ? "w" : "r", writeFlag(fl) ? 1 : 0]));
  for (const n of ["unlinkSync", "unlink"]) wrap(fs, n, (f) => record("os.remove", [p(f)]));
  for (const n of ["rmSync", "rm", "rmdirSync"]) wrap(fs, n, (f) => record("shutil.rmtree", [p(f)]));
  for (const n of ["mkdirSync", "mkdir"]) wrap(fs, n, (f) => record("os.mkdir", [p(f)]));
  for (const n of ["renameSync", "rename"]) wrap(fs, n, (a, b) => record("os.rename", [p(a), p(b)]));
  const cp = require("child_process");
  for (const n of ["spawn", "spawnSync", "execFile", "execFileSync"]) {
    wrap(cp, n, (f, a) => record("subprocess.Popen", [p(f), [p(f), ...(Array.isArray(a) ? a.map(p) : [])]]));
  }
  for (const n of ["exec", "execSync"]) wrap(cp, n, (c) => record("os.system", [p(c)]));
  function url(opts, scheme) {
    if (typeof opts === "string" || opts instanceof URL) return p(opts);
    if (!opts) return "";
    const pth = opts.path || "/";
    if (/^https?:\/\//.test(pth)) return pth;
    return scheme + "//" + (opts.hostname || opts.host || "localhost") + (opts.port ? ":" + opts.port : "") + pth;
  }
  for (const mod of ["http", "https"]) {
    const m = require(mod);
    for (const n of ["request", "get"]) wrap(m, n, (o) => record("urllib.Request", [url(o, mod + ":")]));
  }
  if (typeof globalThis.fetch === "function") {
    const f = globalThis.fetch;
    globalThis.fetch = function (input, init) {
      record("urllib.Request", [typeof input === "string" ? input : input && input.url ? input.url : p(input)]);
      return f.call(this, input, init);
    };
  }
})();

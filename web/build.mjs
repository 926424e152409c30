// build.mjs bundles src/main.ts (and the CSS it imports, uPlot's included) with esbuild into
// ../internal/web/dist: content-hashed files under assets/ (served as immutable by the agent),
// a gzip-compressed copy of each asset (name.gz, served with Content-Encoding: gzip to clients
// that accept it), an index.html that names them, and sources.sha256: the hash of every input
// of the build, which internal/web's TestDistMatchesSources recomputes, so committed assets
// that do not match the committed sources fail the tests. The output is deterministic for the
// same sources, so a rebuild with nothing changed leaves the same files. No network, no CDN at
// run time. Source maps only when asked: CANTAL_UI_SOURCEMAP=1 node build.mjs.
import * as esbuild from "esbuild";
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { constants, gzipSync } from "node:zlib";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(here, "../internal/web/dist");

// Empty dist/ except .gitkeep (tracked so the go:embed pattern always has a file).
await mkdir(out, { recursive: true });
for (const name of await readdir(out)) {
  if (name !== ".gitkeep") await rm(path.join(out, name), { recursive: true, force: true });
}

const result = await esbuild.build({
  entryPoints: [path.join(here, "src/main.ts")],
  bundle: true,
  minify: true,
  sourcemap: process.env.CANTAL_UI_SOURCEMAP === "1" ? "linked" : false,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  outdir: out,
  entryNames: "assets/[name]-[hash]",
  assetNames: "assets/[name]-[hash]",
  metafile: true,
  legalComments: "linked",
  logLevel: "warning",
});

let js = "", css = "";
for (const [file, meta] of Object.entries(result.metafile.outputs)) {
  if (!meta.entryPoint && !file.endsWith(".css")) continue;
  const rel = "/" + path.relative(out, path.resolve(file)).split(path.sep).join("/");
  if (file.endsWith(".js")) js = rel;
  if (file.endsWith(".css")) css = rel;
}
if (!js || !css) throw new Error(`build: missing outputs (js=${js} css=${css})`);

const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>cantal</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${css}">
<script type="module" src="${js}"></script>
</head>
<body>
<noscript>The cantal web UI needs JavaScript. The JSON API is at <a href="/api/v1/status">/api/v1/status</a>.</noscript>
</body>
</html>
`;
await writeFile(path.join(out, "index.html"), html);

// Precompressed assets: the agent serves name.gz when the client accepts gzip.
let raw = 0, gz = 0;
for (const name of await readdir(path.join(out, "assets"))) {
  if (name.endsWith(".gz") || name.endsWith(".map")) continue;
  const file = path.join(out, "assets", name);
  const body = await readFile(file);
  const z = gzipSync(body, { level: constants.Z_BEST_COMPRESSION });
  raw += body.length;
  if (z.length < body.length) {
    await writeFile(file + ".gz", z);
    gz += z.length;
  } else {
    gz += body.length;
  }
}

// sources.sha256: sha256 over "path\0content\0" of every build input, sorted by path (the
// same walk as sourcesHash in internal/web/dist_test.go).
async function walk(dir) {
  const outp = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) outp.push(...(await walk(p)));
    else outp.push(p);
  }
  return outp;
}
const inputs = [...(await walk(path.join(here, "src"))), ...["build.mjs", "package.json", "package-lock.json", "tsconfig.json"].map((f) => path.join(here, f))]
  .map((f) => path.relative(here, f).split(path.sep).join("/"))
  .sort();
const hash = createHash("sha256");
for (const f of inputs) {
  hash.update(f + "\0");
  hash.update(await readFile(path.join(here, f)));
  hash.update("\0");
}
await writeFile(path.join(out, "sources.sha256"), hash.digest("hex") + "\n");
console.log(`built ${js} ${css}: ${raw} bytes, ${gz} gzipped`);

// build.mjs bundles src/main.ts (and the CSS it imports, uPlot's included) with esbuild into
// ../internal/web/dist: content-hashed files under assets/ (served as immutable by the agent)
// and an index.html that names them. The output is deterministic for the same sources, so a
// rebuild with nothing changed leaves the same files. No network, no CDN at run time.
import * as esbuild from "esbuild";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

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
  sourcemap: "linked",
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
console.log(`built ${js} ${css}`);

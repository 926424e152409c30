#!/bin/sh
# build-ui.sh builds the web UI (web/: TypeScript + uPlot, bundled by esbuild) into
# internal/web/dist, which the agent embeds with go:embed. dist is committed (go install needs
# it); after changing web/, commit the rebuilt dist with the sources (TestDistMatchesSources
# fails otherwise). CANTAL_UI_SOURCEMAP=1 adds source maps (gitignored, never committed). `npm ci` installs exactly the
# versions in web/package-lock.json from the npm registry (nothing is fetched at run time:
# no CDN). Idempotent: skips the install when node_modules matches the lockfile and the build
# when dist is newer than every source.
set -eu
cd "$(dirname "$0")/../web"

if ! command -v npm >/dev/null 2>&1; then
	echo "build-ui.sh: npm is missing (Debian: apt-get install nodejs npm)" >&2
	exit 1
fi
# npm ci when node_modules is missing or older than the lockfile.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund --loglevel=error
fi
dist=../internal/web/dist/index.html
if [ -f "$dist" ] && [ -z "$(find src package.json package-lock.json build.mjs tsconfig.json -newer "$dist" 2>/dev/null | head -n 1)" ]; then
	exit 0
fi
npm run --silent build

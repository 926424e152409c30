#!/bin/sh
# install-deps-carbon.sh installs the real programs the carbon and CLI end-to-end tests run
# against: Graphite's carbon-cache (Debian `graphite-carbon`), whisper-fetch (Debian
# `python3-whisper`) to read what carbon stored, and tmux, which drives `cantal top` in a
# terminal of fixed size.
#
# Idempotent: does nothing when every program is already there; otherwise runs `apt-get update`
# once and installs what is missing. Services are never started by the install (the tests start
# their own carbon-cache on loopback with a temporary configuration).
set -eu

. "$(dirname "$0")/apt-lib.sh"

need_pkg carbon-cache graphite-carbon
need_pkg whisper-fetch python3-whisper
need_pkg tmux tmux
install_needed install-deps-carbon.sh carbon-cache whisper-fetch tmux

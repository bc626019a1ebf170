#!/usr/bin/env bash
# Install the reference harness's one dependency: isolated-vm 5.0.4, built from source against the
# machine's Node (20.x; isolated-vm 6.x/7.x need a newer Node). Takes about a minute on 2 cores.
# Needs a C++ toolchain (g++, make) and python3 for node-gyp.
set -euo pipefail
cd "$(dirname "$0")"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" != "20" ]; then
  echo "warning: isolated-vm 5.0.4 is pinned for Node 20; found $(node --version)" >&2
fi
npm install --no-audit --no-fund --save-exact
node -e "const ivm = require('isolated-vm'); const i = new ivm.Isolate({ memoryLimit: 8 }); console.log('isolated-vm', require('isolated-vm/package.json').version, 'ok:', i.compileScriptSync('6 * 7').runSync(i.createContextSync())); i.dispose()"

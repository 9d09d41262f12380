#!/usr/bin/env bash
# Installs the object-storage emulator the storage tests start on loopback, from its
# package registry, inside the test tree (ignored by git):
#   - azurite (npm), the Azure Blob emulator: tests/azurite/node_modules
# The S3 server (s3s-fs) is a Rust dev-dependency and needs nothing here. No GCS
# emulator reachable offline serves object_store's GCS client (docs/object-storage.md).
# Safe to re-run: skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x tests/azurite/node_modules/.bin/azurite-blob ]; then
    # Versions pinned by tests/azurite/package-lock.json.
    npm ci --prefix tests/azurite --no-audit --no-fund --loglevel=error
fi


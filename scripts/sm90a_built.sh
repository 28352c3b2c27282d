#!/usr/bin/env bash
# Exit 0 when fa-bench binary BIN has VARIANT's sm_90a kernels (its --list-variants entry says
# "built for sm_90a"), 1 otherwise: a build without the CuTe headers has none.
#   scripts/sm90a_built.sh BIN VARIANT        (VARIANT: fa3 or fp8)
bin=${1:?usage: scripts/sm90a_built.sh BIN VARIANT}
variant=${2:?usage: scripts/sm90a_built.sh BIN VARIANT}
"$bin" --list-variants 2>/dev/null | grep -A12 -E "^${variant}( |$)" | grep -q 'built for sm_90a'

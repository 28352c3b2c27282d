#!/usr/bin/env bash
# Installs what is missing, and only what the command at hand needs. Idempotent; fast when
# everything is there. The CUDA toolkit (nvcc, cuBLAS, CUPTI) must be installed already.
#   scripts/setup.sh --cxx    fa-bench with every variant: compiler, CMake, Ninja, fmt, CLI11,
#                             nlohmann-json, Google Benchmark, and the header-only wheels: CuTe for
#                             fa3 and fp8, cudnn-frontend for the cuDNN peers (scripts/run.sh)
#   scripts/setup.sh          that, plus the Python venv (.venv) for reports/ with the pinned
#                             reports/requirements.txt
#   scripts/setup.sh --test   that, plus what only the tests need: GoogleTest, clang (libFuzzer,
#                             scripts/fuzz.sh; not with FUZZ_SECONDS=0), chromium (the report test opens report.html
#                             headless), cuobjdump and nvdisasm for the SASS test (scripts/test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  "" | --cxx | --test) ;;
  *)
    echo "setup: error: unknown option '$mode' (accepted: --cxx, --test, or none)" >&2
    exit 2
    ;;
esac

packages=(g++ libfmt-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev)
[ "$mode" = --cxx ] || packages+=(python3-venv)
if [ "$mode" = --test ]; then
  packages+=(libgtest-dev chromium)
  # clang only builds the fuzzer, which FUZZ_SECONDS=0 (CI: .ci/run) leaves out.
  [ "${FUZZ_SECONDS:-60}" = 0 ] || packages+=(clang)
fi
missing=()
# cmake and ninja may come from elsewhere (pip on the GPU machine): any on the PATH will do.
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]} (apt-get; a minute or two)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    # Machines without a registry (the GPU machine) may have these from elsewhere: CMake's
    # find_package says what is really missing.
    echo "setup: warning: could not install ${missing[*]}; continuing" >&2
  fi
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: error: nvcc not found: install the CUDA toolkit (13.0) first" >&2
  exit 1
fi

# CuTe and cudnn-frontend headers (scripts/requirements-headers.txt): fa-bench itself needs them
# (every mode). Never fatal: without one, fa-bench builds and the rows that need it say why not.
scripts/headers.sh || true

[ "$mode" = --cxx ] && exit 0

# Python venv for reports/, keyed by the requirements file so a change reinstalls.
stamp=.venv/.requirements.sha256
want=$(sha256sum reports/requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating .venv from reports/requirements.txt" >&2
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r reports/requirements.txt
  echo "$want" >"$stamp"
fi

# The SASS test's tools in the same .venv (scripts/requirements-sass-tools.txt: cuobjdump and
# nvdisasm), keyed by that file. Offline machines: put the two wheels in .whl/ (pip download -d
# .whl -r scripts/requirements-sass-tools.txt elsewhere).
[ "$mode" = --test ] || exit 0
kstamp=.venv/.requirements-sass-tools.sha256
kwant=$(sha256sum scripts/requirements-sass-tools.txt | cut -d' ' -f1)
if [ "$(cat "$kstamp" 2>/dev/null)" != "$kwant" ]; then
  echo "setup: installing scripts/requirements-sass-tools.txt into .venv (cuobjdump, nvdisasm)" >&2
  from=()
  ls .whl/nvidia_cuda_cuobjdump-*.whl .whl/nvidia_cuda_nvdisasm-*.whl >/dev/null 2>&1 &&
    from=(--no-index --find-links .whl)
  if .venv/bin/pip install -q --disable-pip-version-check --no-deps "${from[@]}" \
    -r scripts/requirements-sass-tools.txt; then
    echo "$kwant" >"$kstamp"
  else
    # The SASS test then skips with the reason.
    echo "setup: warning: could not install scripts/requirements-sass-tools.txt; the SASS test will skip" >&2
  fi
fi

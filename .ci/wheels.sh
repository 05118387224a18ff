#!/usr/bin/env bash
# Each framework's extra installed alone from the built wheel into a fresh virtualenv, and the
# README's quick starts (the core's and that framework's) run there, outside the checkout, so
# the wheel's own files (the vendored BPE file, py.typed) are what runs.
#
#   .ci/wheels.sh [EXTRA...]      # default: langgraph llamaindex minisweagent
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
if [ -n "${FLEXAMEM_WHEELS_DIR:-}" ]; then
  WORK="$FLEXAMEM_WHEELS_DIR"  # kept: the caller asked for it
else
  WORK="$(mktemp -d /tmp/flexamem-wheels.XXXXXX)"
  trap 'rm -rf "$WORK"' EXIT  # three virtualenvs with torch: about 5 GB
fi
mkdir -p "$WORK"
EXTRAS=("$@")
[ ${#EXTRAS[@]} -gt 0 ] || EXTRAS=(langgraph llamaindex minisweagent)
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false LITELLM_LOCAL_MODEL_COST_MAP=True MSWEA_SILENT_STARTUP=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

# pip's own output goes to a log, shown only when it fails.
quiet() { "$@" > "$WORK/pip.log" 2>&1 || { tail -n 40 "$WORK/pip.log" >&2; return 1; }; }

quiet python -m pip install -q build
python -m build --wheel --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log"; exit 1; }
WHEEL="$(ls "$WORK"/dist/flexamem-*.whl)"
echo "[wheels] built $(basename "$WHEEL")"

declare -A SECTION=([langgraph]="LangGraph and LangChain" [llamaindex]="LlamaIndex" [minisweagent]="mini-swe-agent")
for extra in "${EXTRAS[@]}"; do
    venv="$WORK/venv-$extra"
    start=$SECONDS
    python -m venv "$venv"
    quiet "$venv/bin/python" -m pip install -q torch==2.13.0          # the CPU build, as in the README
    quiet "$venv/bin/python" -m pip install -q "$WHEEL[$extra]"
    run="$WORK/run-$extra"
    mkdir -p "$run"
    python .ci/readme_section.py README.md "The core" > "$run/quickstart_core.py"
    python .ci/readme_section.py README.md "${SECTION[$extra]}" > "$run/quickstart_$extra.py"
    (
        cd "$run"  # outside the checkout: imports come from the installed wheel
        "$venv/bin/python" - <<'PY'
import importlib.resources as res
import flexamem_core

root = res.files("flexamem_core")
assert (root / "py.typed").is_file(), "py.typed missing from the wheel"
data = [p.name for p in (root / "data").iterdir()]
assert any(name.endswith(".tiktoken") or "o200k" in name for name in data), data
assert "site-packages" in flexamem_core.__file__, flexamem_core.__file__
print("[wheels] package data present:", ", ".join(sorted(data)))
PY
        "$venv/bin/python" quickstart_core.py > quickstart_core.log
        "$venv/bin/python" "quickstart_$extra.py" > "quickstart_$extra.log"
    )
    heavy=$("$venv/bin/python" -m pip list --format=freeze | grep -iE '^(chromadb|kubernetes|playwright|psycopg)==' || true)
    if [ -n "$heavy" ]; then
        echo "[wheels] $extra pulled in what only other extras need: $heavy" >&2
        exit 1
    fi
    echo "[wheels] $extra: installed alone from the wheel ($("$venv/bin/python" -m pip list --format=freeze | wc -l) packages), quick starts ran ($((SECONDS - start)) s)"
done

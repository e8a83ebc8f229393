#!/usr/bin/env bash
# Run a command once per verl version, each in its own CPU test environment.
#
#   dev/with-verl.sh 0.9.1 0.6.1 0.5.0 -- python -m pytest -q -n 3 --dist loadfile
#
# For each version: create .venvs/verl-<version> with the CPU torch wheel, verl <version> and
# dev/requirements-verl-<version>.txt plus this package's extras (an existing venv whose inputs
# changed is brought up to date in place), install this checkout into it the way a user does (a
# real wheel, not editable: the .pth file and the entry point are what is under test), then run
# the command with that environment first on PATH.
# Installer: uv when it can be had (on PATH, or pip-installed once into .venvs/.uv): it resolves
# and downloads in parallel and hard-links from its cache, which makes a fresh environment take
# well under a minute instead of several; it is given pip's own settings (index, find-links,
# constraints, certificate), so both install the same wheels. VERL_ASCEND_INSTALLER=pip forces pip.
# Concurrent runs on one checkout wait for each other's set-up of the same version (flock).
# Exits non-zero if any run fails (pytest's 5, "no tests collected", included).
#
# torch: the requirements file's `torch==` line (the torch that version's users run), else 2.13.0
# (the CPU wheel); TORCH_SPEC=torch==X overrides it for every version. The package index has no CPU
# builds of 2.7.1 / 2.5.1, so those are its CUDA wheels, which run on CPU. `import torch` needs the
# nvidia-* libraries they link (without them: "ValueError: libcublas.so.*[0-9] not found"), but not
# triton or nvtx; uv leaves those two out (dev/excludes-torch-cuda.txt; pip installs them). Measured
# 2026-12-01 for torch 2.7.1+cu126, uv, 2 shared cores: 4.5 GB and 40 s from an empty uv cache
# (5.0 GB / 44 s with triton), under 2 s from a warm one (hard links); 2.5.1+cu124 the same.
# dev/overrides-verl-<v>.txt, when present, holds versions installed over verl's own pins (what
# the users of that stack run): uv --overrides, pip installs them with --no-deps afterwards.
# A "# test-marker: NAME" line in the requirements file runs only the tests marked NAME there
# (tests/conftest.py; VERL_ASCEND_TEST_MARKER): a small environment for one stack.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#versions[@]} -eq 0 ] || [ $# -eq 0 ]; then
  echo "usage: $0 VERSION... -- COMMAND..." >&2; exit 2
fi
case "${VERL_ASCEND_INSTALLER:-auto}" in
  auto|uv|pip) ;;
  *) echo "VERL_ASCEND_INSTALLER=${VERL_ASCEND_INSTALLER} is not one of auto, uv, pip" >&2; exit 2 ;;
esac

# torch_npu autoload stays at torch's default (on), as on an Ascend host; the test venvs have no torch_npu.
export PIP_DISABLE_PIP_VERSION_CHECK=1
quiet_pip() {  # pip, minus this machine's noise about absent local index folders
  "$@" 2> >(grep -v "^WARNING: Location 'file:" >&2)
}
# System tools the tests need: `verl-ascend check` sandboxes recipes with util-linux unshare and bubblewrap
# when it is on PATH, else by itself (its tests run both ways, so bubblewrap is installed here);
# `ckpt sync`'s tests run real sshd nodes (openssh-server) and copy with rsync.
missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
{ command -v sshd >/dev/null || [ -x /usr/sbin/sshd ]; } || missing+=(openssh-server)
command -v ssh >/dev/null || missing+=(openssh-client)
command -v rsync >/dev/null || missing+=(rsync)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing ${missing[*]} (check's sandbox, ckpt sync's test nodes)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "not installed: ${missing[*]}: apt install ${missing[*]} / yum install ${missing[*]}" >&2; exit 2
  fi
fi
mkdir -p .venvs

# ---- the installer -------------------------------------------------------------------------------
UV=""
find_uv() {
  [ "${VERL_ASCEND_INSTALLER:-auto}" = pip ] && return 0
  if command -v uv >/dev/null; then UV=$(command -v uv); return 0; fi
  if [ ! -x .venvs/.uv/bin/uv ]; then
    echo "== installing uv into .venvs/.uv (a faster installer; pip is used if this fails)"
    rm -rf .venvs/.uv.tmp
    if PIP_ROOT_USER_ACTION=ignore quiet_pip "$PY" -m pip install -q --target .venvs/.uv.tmp uv >/dev/null && [ -x .venvs/.uv.tmp/bin/uv ]; then
      rm -rf .venvs/.uv && mv .venvs/.uv.tmp .venvs/.uv
    else
      rm -rf .venvs/.uv.tmp
    fi
  fi
  if [ -x .venvs/.uv/bin/uv ]; then UV=$PWD/.venvs/.uv/bin/uv; fi
  if [ -z "$UV" ] && [ "${VERL_ASCEND_INSTALLER:-auto}" = uv ]; then
    echo "VERL_ASCEND_INSTALLER=uv but uv could not be installed: pip install uv, or unset it" >&2; exit 2
  fi
  return 0
}
# pip's settings (pip.conf files and PIP_* variables, as `pip config list` shows them) as uv options,
# so uv sees the same indexes, local wheel folders and constraints as pip does.
UV_ARGS=()
uv_args_from_pip() {
  local line
  while IFS= read -r line; do UV_ARGS+=("$line"); done < <("$PY" - <<'PY'
import ast, subprocess, sys
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
seen = {}
for line in out.splitlines():  # e.g. global.find-links='/opt/wheels' or :env:.extra-index-url='a b'
    key, _, value = line.partition("=")
    try:
        value = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        continue
    name = key.rsplit(".", 1)[-1]
    if key.startswith(":env:") or name not in seen:  # the environment wins over the files
        seen[name] = value
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint"}
for name, flag in flags.items():
    for item in str(seen.get(name, "")).split():
        print(flag); print(item)
if str(seen.get("no-index", "")).lower() in ("1", "true", "yes", "on"):
    print("--no-index")
if seen.get("cert"):
    print("--cert"); print(seen["cert"])
PY
)
  # pip weighs every index and keeps the best version; uv's default stops at the first index naming a package
  UV_ARGS+=(--index-strategy unsafe-best-match)
}

OVERRIDES=""  # set per version: dev/overrides-verl-<v>.txt or empty
install_into() {  # install_into VENV ARGS...: resolve and install ARGS into VENV
  local venv=$1; shift
  if [ -n "$UV" ]; then
    "$UV" pip install -q --python "$venv/bin/python" "${UV_ARGS[@]}" --excludes dev/excludes-torch-cuda.txt \
      ${OVERRIDES:+--overrides "$OVERRIDES"} "$@"
  else
    quiet_pip "$venv/bin/python" -m pip install -q "$@"
  fi
}

create_venv() {  # create_venv VENV PYTHON: an empty venv with pip in it (tests call `python -m pip download`)
  local venv=$1 python=$2
  rm -rf "$venv"
  if [ -n "$UV" ]; then
    "$UV" venv -q --seed --python "$python" "$venv"
  else
    "$python" -m venv "$venv"
  fi
}

# A requirements file may name the Python of that stack (`# python: 3.12`): used when this machine has
# python3.12 on PATH (PYTHON, when set, wins for every version); otherwise the default, said once.
python_for() {
  local want
  want=$(sed -n 's/^# python: *\([0-9][0-9.]*\).*/\1/p' "$1" | head -1)
  if [ -n "${PYTHON:-}" ] || [ -z "$want" ]; then echo "$PY"; return; fi
  local found=""
  if command -v "python$want" >/dev/null && "python$want" -c "import sys" 2>/dev/null; then
    found="python$want"
  elif command -v pyenv >/dev/null; then  # installed under pyenv but not its active version: its shim refuses
    found=$(ls -d "$(pyenv root)"/versions/"$want".*/bin/"python$want" 2>/dev/null | sort -V | tail -1)
  fi
  if [ -n "$found" ]; then
    echo "$found"
  else
    echo "== $1 names Python $want, which this machine does not have: using $("$PY" -c 'import sys; print(sys.version.split()[0])')" >&2
    echo "$PY"
  fi
}

find_uv
if [ -n "$UV" ]; then
  uv_args_from_pip
  # --cert is recent in uv; SSL_CERT_FILE is what older and newer uv both read
  for ((i = 0; i < ${#UV_ARGS[@]}; i++)); do
    if [ "${UV_ARGS[$i]}" = --cert ]; then export SSL_CERT_FILE=${SSL_CERT_FILE:-${UV_ARGS[$((i + 1))]}}; fi
  done
  filtered=()
  for ((i = 0; i < ${#UV_ARGS[@]}; i++)); do
    if [ "${UV_ARGS[$i]}" = --cert ]; then i=$((i + 1)); continue; fi
    filtered+=("${UV_ARGS[$i]}")
  done
  UV_ARGS=("${filtered[@]}")
fi

# Bytecode: uv installs none (pip compiles every file at install). Python writes it on first import
# and reuses it, unless PYTHONDONTWRITEBYTECODE is set: then every process (each Ray worker of a
# rehearsal) compiles torch, transformers and verl from source again, ~2x their import time. So it
# is written here, on first import, into the environment's own folders (and gitignored __pycache__).
unset PYTHONDONTWRITEBYTECODE

# ---- one environment per version -----------------------------------------------------------------
status=0
index=0
for v in "${versions[@]}"; do
  req="dev/requirements-verl-$v.txt"
  [ -f "$req" ] || { echo "no $req: supported test versions are $(ls dev/requirements-verl-*.txt | sed 's/.*verl-//;s/.txt//' | tr '\n' ' ')" >&2; exit 2; }
  venv=".venvs/verl-$v"
  torch_spec=${TORCH_SPEC:-$(grep -m1 -oE '^torch==[^[:space:]#]+' "$req" || echo torch==2.13.0)}
  overrides="dev/overrides-verl-$v.txt"
  [ -f "$overrides" ] || overrides=""
  OVERRIDES=$overrides
  marker=$(sed -n 's/^# test-marker: *\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$req" | head -1)
  python=$(python_for "$req")
  stamp=$(cat "$req" pyproject.toml dev/excludes-torch-cuda.txt ${overrides:+"$overrides"} | sha256sum | cut -c1-16)-$torch_spec-$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  (
    if command -v flock >/dev/null; then flock 9; fi  # another run of this script on this checkout may be setting up the same version
    want_minor=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    have_minor=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
    if [ ! -f "$venv/pyvenv.cfg" ] || [ ! -x "$venv/bin/python" ] || [ "$have_minor" != "$want_minor" ]; then
      # no pyvenv.cfg = not a venv (an interrupted creation): its python would install globally
      echo "== creating $venv"
      create_venv "$venv" "$python"
      # torch first on its own, from the CPU wheel, so nothing below can pull a CUDA build
      install_into "$venv" "$torch_spec"
    fi
    if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
      echo "== installing dependencies into $venv${UV:+ (uv)}"
      install_into "$venv" "$torch_spec" -r "$req" ".[test,convert,plot]"
      if [ -z "$UV" ] && [ -n "$overrides" ]; then quiet_pip "$venv/bin/python" -m pip install -q --no-deps -r "$overrides"; fi
      echo "$stamp" > "$venv/.stamp"
    fi
    if [ -n "$UV" ]; then
      install_into "$venv" --no-deps --reinstall-package verl-ascend . >/dev/null
    else
      quiet_pip "$venv/bin/python" -m pip install -q --no-deps --force-reinstall . >/dev/null
    fi
  ) 9>".venvs/verl-$v.lock"
  echo "== verl $v ($torch_spec${marker:+, only tests marked $marker}): $*"
  # tests marked verl_agnostic run only where VERL_ASCEND_TEST_ENV_INDEX=0 (tests/conftest.py). Only a pytest
  # command gets the two: every VERL_ASCEND* variable reaches Ray's workers (ray_runtime_env) and a rehearsal's
  # settings line, where a user of README's first command would see test variables as if they were settings
  test_vars=()
  case " $* " in *pytest*) test_vars=(VERL_ASCEND_TEST_ENV_INDEX=$index VERL_ASCEND_TEST_MARKER=$marker) ;; esac
  if ! env PATH="$PWD/$venv/bin:$PATH" VIRTUAL_ENV="$PWD/$venv" "${test_vars[@]}" "$@"; then
    echo "== verl $v: FAILED" >&2
    status=1
  fi
  index=$((index + 1))
done
# The CI budget is 450 x the CPU-seconds of `import verl` on the same host (README): with two or more
# versions (the CI command), print both figures, so every run states where it stands. Printed, never
# asserted: a slow host is not a failing test. The figure is the median of three imports, each printed: one
# import on this project's host read 4.2 to 5.1 CPU-s from run to run (2026-12-05/06), a spread of 400 s of budget.
if [ ${#versions[@]} -ge 2 ]; then
  first=".venvs/verl-${versions[0]}/bin/python"
  cpu=$("$first" - <<'PY'
import resource, statistics, subprocess, sys
seen = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import verl"], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seen.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
print(f"{statistics.median(seen):.1f} median of {', '.join(f'{s:.2f}' for s in seen)}")
PY
) || cpu=""
  if [ -n "$cpu" ]; then
    budget=$("$PY" -c "print(round(450 * ${cpu%% *}))")
    echo "== budget: this run ${SECONDS} s; import verl ${cpu%% *} CPU-s (${cpu#* }; verl ${versions[0]}) -> 450 x = ${budget} s;" \
         "$([ "$SECONDS" -le "$budget" ] && echo within || echo OVER) (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  fi
fi
exit $status

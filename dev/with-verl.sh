#!/usr/bin/env bash
# Run a command once per verl version, each in its own CPU test environment.
#
#   dev/with-verl.sh 0.9.1 0.6.1 -- python -m pytest -q -n 2 --dist loadfile
#
# For each version: create .venvs/verl-<version> with the CPU torch wheel, verl <version> and
# dev/requirements-verl-<version>.txt plus this package's extras (an existing venv whose inputs
# changed is brought up to date in place), install this checkout into it the way a user does (a
# real wheel, not editable: the .pth file and the entry point are what is under test), then run
# the command with that environment first on PATH.
# Exits non-zero if any run fails (pytest's 5, "no tests collected", included).
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
PY=${PYTHON:-python3}

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#versions[@]} -eq 0 ] || [ $# -eq 0 ]; then
  echo "usage: $0 VERSION... -- COMMAND..." >&2; exit 2
fi

# torch_npu autoload stays at torch's default (on), as on an Ascend host; the test venvs have no torch_npu.
export PIP_DISABLE_PIP_VERSION_CHECK=1
quiet_pip() {  # pip, minus this machine's noise about absent local index folders
  "$@" 2> >(grep -v "^WARNING: Location 'file:" >&2)
}
# System tools the tests need: `verl-ascend check` runs recipes only inside bubblewrap (+ util-linux
# unshare); `ckpt sync`'s tests run real sshd nodes (openssh-server) and copy with rsync.
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
status=0
index=0
for v in "${versions[@]}"; do
  req="dev/requirements-verl-$v.txt"
  [ -f "$req" ] || { echo "no $req: supported test versions are $(ls dev/requirements-verl-*.txt | sed 's/.*verl-//;s/.txt//' | tr '\n' ' ')" >&2; exit 2; }
  venv=".venvs/verl-$v"
  stamp=$(cat "$req" pyproject.toml | sha256sum | cut -c1-16)-$TORCH_SPEC
  if [ ! -f "$venv/pyvenv.cfg" ] || [ ! -x "$venv/bin/python" ]; then
    # no pyvenv.cfg = not a venv (an interrupted creation): its python would install globally
    echo "== creating $venv"
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    quiet_pip "$venv/bin/python" -m pip install -q "$TORCH_SPEC"
  fi
  if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "== installing dependencies into $venv"
    quiet_pip "$venv/bin/python" -m pip install -q "$TORCH_SPEC" -r "$req" ".[test,convert,plot]"
    echo "$stamp" > "$venv/.stamp"
  fi
  quiet_pip "$venv/bin/python" -m pip install -q --no-deps --force-reinstall . >/dev/null
  echo "== verl $v: $*"
  # tests marked verl_agnostic run only where VERL_ASCEND_TEST_ENV_INDEX=0 (tests/conftest.py)
  if ! PATH="$PWD/$venv/bin:$PATH" VIRTUAL_ENV="$PWD/$venv" VERL_ASCEND_TEST_ENV_INDEX=$index "$@"; then
    echo "== verl $v: FAILED" >&2
    status=1
  fi
  index=$((index + 1))
done
exit $status

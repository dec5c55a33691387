# Sourced by the entry scripts and scripts/activate: the environment every acidstream process (and Spark's
# Python workers) runs in. Leaves no variables of its own behind in the shell that sources it.
_acidstream_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$_acidstream_root/.venv/bin:$PATH"
export PYSPARK_PYTHON="$_acidstream_root/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$_acidstream_root/.venv/bin/python"
unset _acidstream_root
if [ -z "${JAVA_HOME:-}" ] && command -v java >/dev/null 2>&1; then
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
    export JAVA_HOME
fi

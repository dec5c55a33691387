# Sourced by the entry scripts: the environment every acidstream process (and Spark's Python workers) runs in.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$root/.venv/bin:$PATH"
export PYSPARK_PYTHON="$root/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$root/.venv/bin/python"
if [ -z "${JAVA_HOME:-}" ] && command -v java >/dev/null 2>&1; then
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
    export JAVA_HOME
fi

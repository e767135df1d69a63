# Steps of a test run that all run whatever happened before, and a summary table at the
# end. Sourced by scripts/test-all.sh (and by its test, crates/memlint/tests/scripts.rs).
#
#   run_step NAME COMMAND...   run one step; record passed / FAILED (exit N) and its time
#   skip_step NAME WHY         record a step that could not run (it counts as not passed)
#   summary                    print the table; return 0 only if every step passed

_step_names=()
_step_results=()
_step_times=()

run_step() {
    local name=$1
    shift
    printf '\n==> %s\n' "$name"
    local start=$SECONDS
    "$@"
    local status=$?
    _step_names+=("$name")
    _step_times+=($((SECONDS - start)))
    if [[ $status -eq 0 ]]; then
        _step_results+=("passed")
    else
        _step_results+=("FAILED (exit $status)")
        printf '==> %s failed with exit status %d\n' "$name" "$status" >&2
    fi
    return $status
}

skip_step() {
    printf '\n==> %s: skipped (%s)\n' "$1" "$2"
    _step_names+=("$1")
    _step_times+=(0)
    _step_results+=("SKIPPED: $2")
}

summary() {
    local failed=0 i
    printf '\n==> summary\n\n'
    printf '%-40s  %-40s  %8s\n' "step" "result" "time"
    printf '%-40s  %-40s  %8s\n' "----" "------" "----"
    for i in "${!_step_names[@]}"; do
        printf '%-40s  %-40s  %7ss\n' "${_step_names[$i]}" "${_step_results[$i]}" "${_step_times[$i]}"
        [[ ${_step_results[$i]} == passed ]] || failed=$((failed + 1))
    done
    echo
    if [[ $failed -eq 0 ]]; then
        echo "all ${#_step_names[@]} steps passed"
        return 0
    fi
    echo "$failed of ${#_step_names[@]} steps did not pass" >&2
    return 1
}

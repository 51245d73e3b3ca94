# Sourced by the ia_params scripts (verbs_params.sh, ofi_write_completion.sh):
# opens IAs of "$tmp/dat.conf" with the open probe "$probe" and judges how
# their ia_params were taken; a wrong answer prints FAIL and sets fail=1.
open_ia() { DAT_OVERRIDE=$tmp/dat.conf "$probe" "$1" >"$tmp/out" 2>"$tmp/err"; }
# expect_taken IA...: each open may still fail (no device), but not on its ia_params.
expect_taken() {
    local ia
    for ia in "$@"; do
        open_ia "$ia"
        if grep -q "ia_params" "$tmp/err" || grep -q "DAT_INVALID_PARAMETER" "$tmp/out"; then
            echo "FAIL: $ia: its ia_params were refused:"; sed 's/^/    /' "$tmp/out" "$tmp/err"; fail=1
        else
            echo "ok: $ia: ia_params taken ($(head -c 120 "$tmp/out"))"
        fi
    done
}
# expect_refused IA TEXT: DAT_INVALID_PARAMETER, and a log line holding TEXT.
expect_refused() {
    open_ia "$1"
    if grep -q "DAT_INVALID_PARAMETER" "$tmp/out" && grep -qF "$2" "$tmp/err"; then
        echo "ok: $1: refused, saying '$2'"
    else
        echo "FAIL: $1: not refused as it should be:"; sed 's/^/    /' "$tmp/out" "$tmp/err"; fail=1
    fi
}

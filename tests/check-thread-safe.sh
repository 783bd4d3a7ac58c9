#!/bin/bash
# SPDX-License-Identifier: MIT
# rtsoakd, the uploader and rtsoak-server run threads: their code calls no libc function that
# keeps hidden state between calls (strtok and the like), whose _r form is what they use.
# Two capture threads splitting /proc lines with strtok at once once took each other's fields.
# Usage: check-thread-safe.sh SRCDIR
set -u
cd "$1" || exit 1
banned='strtok|localtime|gmtime|ctime|asctime|rand|srand|inet_ntoa|gethostbyname|getpwent|readdir64_r|ttyname|ecvt|fcvt'
n=0
failed=0
dirs=(common storage daemon uploader server loadgen)
echo "1..${#dirs[@]}"
for d in "${dirs[@]}"; do
        n=$((n + 1))
        # Comments are left out: a line whose code, before any //, /* or " * ", calls one.
        hits=$(grep -nE "\b($banned)\(" "$d"/*.c "$d"/*.h 2>/dev/null |
                grep -vE '^[^:]+:[0-9]+:\s*(\*|/\*|//)')
        if [ -z "$hits" ]; then
                echo "ok $n - $d/ calls no thread-unsafe libc function"
        else
                failed=1
                echo "not ok $n - $d/ calls a libc function with hidden state (use its _r form)"
                printf '%s\n' "$hits" | head -20 | sed 's/^/# /'
        fi
done
exit $failed

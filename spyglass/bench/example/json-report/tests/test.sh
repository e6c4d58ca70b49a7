#!/bin/bash
# the verifier: runs in the workspace after the agent; writes the reward
set -u
grep -q "total: 33.75" report.txt && echo 1 > "$REWARD_FILE" || echo 0 > "$REWARD_FILE"

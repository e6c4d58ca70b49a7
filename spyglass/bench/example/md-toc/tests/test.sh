#!/bin/bash
# the verifier: runs in the workspace after the agent; writes the reward
set -u
grep -q "^- \[Install\](#install)" README.md && grep -q "^- \[License\](#license)" README.md && echo 1 > "$REWARD_FILE" || echo 0 > "$REWARD_FILE"

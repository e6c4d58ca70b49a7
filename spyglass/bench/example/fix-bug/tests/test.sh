#!/bin/bash
# the verifier: runs in the workspace after the agent; writes the reward
set -u
python3 -c "import calc; assert calc.add(2, 3) == 5 and calc.add(-1, 1) == 0" && echo 1 > "$REWARD_FILE" || echo 0 > "$REWARD_FILE"

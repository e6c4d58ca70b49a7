#!/bin/bash
# the reference solution (never shown to the agent)
python3 ../skills/md-toc/scripts/toc.py README.md

#!/bin/bash
# the reference solution (never shown to the agent)
sed -i 's/return a - b/return a + b/' calc.py

import subprocess
import sys

r = subprocess.run([sys.executable, "-c", "import test_calc as t; t.test_add(); print('tests pass')"],
                   capture_output=True, text=True)
print(r.stdout or r.stderr[-500:])
print('status:', 'pass' if r.returncode == 0 else 'fail')

"""`python -m wconfd` runs the daemon."""

import sys

from wconfd.main import main

sys.exit(main())

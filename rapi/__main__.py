"""`python -m rapi` runs the RAPI daemon."""

import sys

from rapi.main import main

sys.exit(main())

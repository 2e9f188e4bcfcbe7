"""`python -m jobproc <job_id>` runs one job (see jobproc.main)."""

import sys

from jobproc.main import main

sys.exit(main())

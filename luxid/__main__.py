"""`python -m luxid` runs the daemon."""

import sys

from luxid.main import main

sys.exit(main())

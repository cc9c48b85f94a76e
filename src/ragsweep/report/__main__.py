import sys

from ragsweep.report import main

sys.exit(main())

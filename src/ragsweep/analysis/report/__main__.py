import sys

from ragsweep.analysis.report import main

sys.exit(main())

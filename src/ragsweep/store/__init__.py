"""Where work is kept: :mod:`ragsweep.store.cache`, the content-addressed cache every stage
reaches (keys in, values out, misses computed once), safe for concurrent processes; large values
are files it records. It sits under every stage and imports none of them."""

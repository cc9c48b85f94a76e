"""What the numbers support: statistics of bounded metrics and comparisons across systems."""

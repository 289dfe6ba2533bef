"""``jobguard drill``: the seed's failure cases, run on purpose against a deployed stack."""

"""The Lambda functions jobguard itself deploys beside your jobs (``jobguard.cdk``
points at them; they ship in every code asset):

- :mod:`jobguard.functions.recovery`: the bounded recovery Lambda;
- :mod:`jobguard.functions.reconciler`: the scheduled reconciler of a job.
"""

"""jobguard's CDK app: ``app.py`` (the app ``cdk.json`` names), ``stack.py`` (the stack
that composes the constructs) and ``constructs/`` (reusable in your own CDK app)."""

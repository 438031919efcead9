"""Safety: risk assessment of code, the approval policy, secrets kept from kernels, paths kept inside.

Import the submodules directly (`from interpreter_lsp.safety.risk import assess`); this package imports
nothing itself so the server starts fast.
"""

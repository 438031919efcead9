"""Risk rules for Python code: scan.py walks the syntax tree, values.py evaluates expressions, tables.py
names the functions that matter, ipython.py routes magics and shell escapes.
"""

from interpreter_lsp.safety.python.scan import assess_python

__all__ = ["assess_python"]

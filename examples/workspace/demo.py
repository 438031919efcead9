# A small workspace to try interpreter-lsp in Neovim.
# Put the cursor in a cell and run :InterpreterRun (or <Space>r). The kernel keeps its state,
# so run the cells in order. Ask the model with :Interpreter <question> once a model is set up.

# %% 1. Plain Python: the output streams into the panel on the right
import platform

total = sum(range(1, 101))
print(f"Python {platform.python_version()}: 1 + 2 + ... + 100 = {total}")

# %% 2. State carries over between cells: `total` is still defined
squares = [n * n for n in range(10)]
print("squares:", squares)
print("total / 100 =", total / 100)

# %% 3. Streaming: lines arrive as they are printed (:InterpreterInterrupt stops it)
import time

for step in range(5):
    print(f"step {step + 1} of 5", flush=True)
    time.sleep(0.5)

# %% 4. An error is shown as an error, with its traceback
def average(values):
    return sum(values) / len(values)


average([])

# %% 5. A plot: saved as a PNG, its path shown in the panel (drawn inline when image.nvim is installed)
import matplotlib

matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt

plt.plot(squares)
plt.title("squares")
plt.show()
